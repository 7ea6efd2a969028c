// Package protodoc holds the API's descriptors with their source info (the
// comments of proto/), which the descriptors compiled into the generated Go
// code lack, so that gRPC reflection can serve them and `grpcurl describe`
// shows the documentation.
//
// inference.binpb is built from proto/ by buf (go generate ./internal/protodoc
// from the repository root); TestCurrent fails when it no longer matches the
// generated code in api/.
package protodoc

//go:generate sh -c "cd ../.. && go tool -modfile=tools/go.mod buf build --as-file-descriptor-set -o internal/protodoc/inference.binpb"

import (
	_ "embed"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

//go:embed inference.binpb
var binpb []byte

var (
	once  sync.Once
	files *protoregistry.Files
	err   error
)

// Files is the API's files with comments, resolving their imports
// (google/protobuf/...) from the same set.
func Files() (*protoregistry.Files, error) {
	once.Do(func() {
		var set descriptorpb.FileDescriptorSet
		if err = proto.Unmarshal(binpb, &set); err != nil {
			err = fmt.Errorf("protodoc: %w", err)
			return
		}
		if files, err = protodesc.NewFiles(&set); err != nil {
			err = fmt.Errorf("protodoc: %w", err)
		}
	})
	return files, err
}

// Resolver finds descriptors in the documented set first and in the
// process's registry (health, reflection, ...) otherwise.
type Resolver struct{ Docs *protoregistry.Files }

// FindFileByPath implements the reflection service's descriptor resolver.
func (r Resolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.Docs.FindFileByPath(path); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

// FindDescriptorByName implements the reflection service's descriptor resolver.
func (r Resolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.Docs.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}
