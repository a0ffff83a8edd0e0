"""The three gRPC services of the Viking Context Engine."""
