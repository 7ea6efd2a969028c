package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	"github.com/weft-inference/weft/internal/protodoc"
)

// registerReflection registers gRPC reflection (v1 and v1alpha, as
// reflection.Register does) serving the API's descriptors with their proto
// comments (internal/protodoc), so `grpcurl describe` shows the docs; other
// files (health, reflection) come from the generated code.
func registerReflection(s *grpc.Server) error {
	docs, err := protodoc.Files()
	if err != nil {
		return err
	}
	opts := reflection.ServerOptions{Services: s, DescriptorResolver: protodoc.Resolver{Docs: docs}}
	reflectionv1alpha.RegisterServerReflectionServer(s, reflection.NewServer(opts))
	reflectionv1.RegisterServerReflectionServer(s, reflection.NewServerV1(opts))
	return nil
}
