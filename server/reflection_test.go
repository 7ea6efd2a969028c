package server

import (
	"context"
	"slices"
	"testing"

	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestReflection: the service, health, reflection and ORCA are listed, and the
// inference service's file descriptor is served (what grpcurl needs).
func TestReflection(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	s, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	if err := s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range r.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	for _, want := range []string{ServiceName, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "xds.service.orca.v3.OpenRcaService"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
	if err := s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: ServiceName}}); err != nil {
		t.Fatal(err)
	}
	r, err = s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	fds := r.GetFileDescriptorResponse().GetFileDescriptorProto()
	if len(fds) == 0 {
		t.Fatalf("no file descriptor for %s: %v", ServiceName, r)
	}
	// The descriptor carries the proto's comments (what grpcurl describe shows).
	var fd descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(fds[0], &fd); err != nil {
		t.Fatal(err)
	}
	comments := 0
	for _, loc := range fd.GetSourceCodeInfo().GetLocation() {
		if loc.GetLeadingComments() != "" {
			comments++
		}
	}
	if fd.GetName() != "inference/v1/inference_service.proto" || comments < 50 {
		t.Errorf("reflection served %s with %d commented locations; want the API file with its comments", fd.GetName(), comments)
	}
}
