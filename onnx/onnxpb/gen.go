// Package onnxpb holds the generated Go types for the ONNX messages qnnprep
// writes (onnx.proto in this directory).
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative onnx.proto
