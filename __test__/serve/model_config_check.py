"""Parses model configurations (a JSON list on stdin, as GET /v2/models/{m}/config gave them)
strictly as Triton's model_config.proto ModelConfig, with the generated code tritonclient
ships (tritonclient.grpc.model_config_pb2): an unknown field or a wrong type fails the parse.
Prints each parsed message back as JSON (proto field names, defaults left out) for
__test__/serve/model-config.spec.js, or {"error": ...} for one that does not parse.

    python model_config_check.py [HOST:GRPC_PORT NAME...]

With a gRPC address, also asks each NAME's config with tritonclient.grpc's get_model_config
and prints them after, in the same form: {"rest": [...], "grpc": [...]}.
"""
import json
import sys

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2

out = []
for doc in json.load(sys.stdin):
    try:
        message = json_format.ParseDict(doc, model_config_pb2.ModelConfig(), ignore_unknown_fields=False)
        out.append(json_format.MessageToDict(message, preserving_proto_field_name=True))
    except json_format.ParseError as e:
        out.append({"error": str(e)})
if len(sys.argv) > 2:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(sys.argv[1])
    grpc_out = [json_format.MessageToDict(client.get_model_config(name).config, preserving_proto_field_name=True) for name in sys.argv[2:]]
    print(json.dumps({"rest": out, "grpc": grpc_out}))
else:
    print(json.dumps(out))
