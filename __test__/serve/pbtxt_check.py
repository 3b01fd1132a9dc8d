"""protobuf's own text format on model_config.proto's ModelConfig (from tritonclient, in
.venv-grpc), for __test__/serve/config-pbtxt.spec.js.

    python pbtxt_check.py parse     # stdin: a JSON list of texts
    python pbtxt_check.py write     # stdin: a JSON list of ModelConfigs (GET .../config's JSON)

parse prints, for each text, {"ok": true, "canonical": MessageToString of what it parsed to,
"values": its MessageToDict} or {"ok": false, "error": why protobuf refused it}. write prints each config, parsed strictly
from its JSON, as the text a config.pbtxt holds.
"""
import json
import sys

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from google.protobuf import json_format

out = []
if sys.argv[1] == "write":
    for doc in json.load(sys.stdin):
        message = json_format.ParseDict(doc, model_config_pb2.ModelConfig(), ignore_unknown_fields=False)
        out.append(text_format.MessageToString(message))
    print(json.dumps(out))
    sys.exit(0)
for text in json.load(sys.stdin):
    try:
        msg = text_format.Parse(text, model_config_pb2.ModelConfig())
        values = json_format.MessageToDict(msg, preserving_proto_field_name=True)
        out.append({"ok": True, "canonical": text_format.MessageToString(msg), "values": values})
    except text_format.ParseError as e:
        out.append({"ok": False, "error": str(e)})
print(json.dumps(out))
