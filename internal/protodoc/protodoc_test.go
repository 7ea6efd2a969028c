package protodoc

import (
	"strings"
	"testing"

	_ "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

// TestCurrent: the embedded descriptors, comments aside, are exactly the
// generated code's. After a .proto change, run go generate ./internal/protodoc.
func TestCurrent(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	gen := inferencev1.File_inference_v1_inference_service_proto
	doc, err := files.FindFileByPath(gen.Path())
	if err != nil {
		t.Fatalf("%s not in inference.binpb: %v", gen.Path(), err)
	}
	got := protodesc.ToFileDescriptorProto(doc)
	got.SourceCodeInfo = nil
	want := protodesc.ToFileDescriptorProto(gen)
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("inference.binpb is stale; run go generate ./internal/protodoc (-generated +embedded):\n%s", diff)
	}
}

// TestComments: the service and a field carry their proto comments.
func TestComments(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"inference.v1.InferenceService", "inference.v1.ChatCancel", "inference.v1.ChatTurn.messages"} {
		d, err := Resolver{files}.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatal(err)
		}
		loc := d.ParentFile().SourceLocations().ByDescriptor(d)
		if strings.TrimSpace(loc.LeadingComments) == "" {
			t.Errorf("%s: no leading comment", name)
		}
	}
	// Files outside the set come from the process's registry.
	if _, err := (Resolver{files}).FindFileByPath("grpc/health/v1/health.proto"); err != nil {
		t.Errorf("health.proto: %v", err)
	}
}
