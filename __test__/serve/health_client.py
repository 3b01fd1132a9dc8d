"""Asks a zgc-runtime server's grpc.health.v1.Health with grpcio-health-checking's own client
(the stubs grpc-health-probe and Kubernetes' probes speak), and prints what it saw as JSON for
__test__/serve/grpc-health.spec.js. Reads commands from stdin, one per line:

    check SERVICE      Check, printing {"status": NAME} or {"code": NAME}
    watch SERVICE      opens a Watch, printing each status as it comes, until "end"

    python health_client.py HOST:PORT
"""
import json
import sys
import threading

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

channel = grpc.insecure_channel(sys.argv[1])
stub = health_pb2_grpc.HealthStub(channel)
name = health_pb2.HealthCheckResponse.ServingStatus.Name
watches = []


def emit(doc):
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def watch(service):
    call = stub.Watch(health_pb2.HealthCheckRequest(service=service))
    watches.append(call)

    def run():
        try:
            for response in call:
                emit({"watch": service, "status": name(response.status)})
        except grpc.RpcError as e:
            emit({"watch": service, "ended": e.code().name})
        else:
            emit({"watch": service, "ended": "OK"})

    threading.Thread(target=run, daemon=True).start()


for line in sys.stdin:
    command, _, service = line.rstrip("\n").partition(" ")
    if command == "check":
        try:
            emit({"check": service, "status": name(stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status)})
        except grpc.RpcError as e:
            emit({"check": service, "code": e.code().name, "details": e.details()})
    elif command == "watch":
        watch(service)
    elif command == "end":
        for call in watches:
            call.cancel()
        break
