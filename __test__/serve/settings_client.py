"""Triton's log and trace settings against a zgc-runtime server, with the real tritonclient
(HTTP from .venv-ref, gRPC from .venv-grpc), for __test__/serve/settings.spec.js. Reads on stdin
a JSON list of calls [method, kwargs] (get_log_settings, update_log_settings,
get_trace_settings, update_trace_settings); prints one JSON list of what each answered: the
settings as plain values ({key: value}, gRPC's typed values unwrapped), or its error.

    python settings_client.py http|grpc HOST:PORT
"""
import json
import sys

from tritonclient.utils import InferenceServerException

protocol, url = sys.argv[1], sys.argv[2]
if protocol == "http":
    import tritonclient.http as C
else:
    import tritonclient.grpc as C
client = C.InferenceServerClient(url=url)


def plain(answer):
    if protocol == "http":
        return answer
    out = {}
    for key, value in answer["settings"].items():
        # LogSettings: a oneof of bool_param, uint32_param, string_param; TraceSetting: a list.
        # Triton's REST gives a trace setting's one value as a string; gRPC always as a list.
        if "value" in value:
            out[key] = value["value"] if key == "trace_level" else value["value"][0]
        else:
            out[key] = next(iter(value.values()))
    return out


calls = json.load(sys.stdin)
seen = []
for method, kwargs in calls:
    if protocol == "grpc":
        kwargs = dict(kwargs, as_json=True)
    try:
        seen.append(plain(getattr(client, method)(**kwargs)))
    except InferenceServerException as e:
        seen.append({"error": [str(e.status()), e.message()]})
print(json.dumps(seen))
