#!/usr/bin/env bash
# Regenerates the committed gRPC stubs from leader.proto (needs grpcio-tools):
#   src/zonegate/leader_forwarder/proto/generate.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
"${PYTHON:-python3}" -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. \
    zonegate/leader_forwarder/proto/leader.proto
