# Build targets are the lead's; this file so far only regenerates the plugin
# protos.
#
# Tools: protoc (/usr/bin/protoc, Debian/Ubuntu package protobuf-compiler) and
# the two Go code generators, installed into $(go env GOPATH)/bin with (one
# module each, so two commands):
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@latest
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest

PROTOC ?= protoc
PROTOC_GEN := $(shell go env GOPATH)/bin

# Every plugin contract proto; add new ones here. Imports are relative to the
# repository root (import "pluginapi/base/proto/base.proto").
PROTOS := \
	pluginapi/base/proto/base.proto \
	pluginapi/driver/proto/driver.proto \
	pluginapi/sched/proto/sched.proto \
	pluginapi/iface/proto/iface.proto

.PHONY: proto
proto:
	PATH="$(PROTOC_GEN):$$PATH" $(PROTOC) -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative \
		$(PROTOS)
