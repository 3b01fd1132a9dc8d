"""Validates deploy/'s manifests against published schemas: the Deployment and Service with
kubernetes-validate (Kubernetes 1.37 JSON schemas, strict: unknown fields are errors), the KServe
ServingRuntime and InferenceService against the kserve SDK's own models (every field must be one
the model declares, with the declared type). Prints one line per document; exits 1 on an error.

    python scripts/validate-deploy.py deploy
"""
import importlib
import os
import re
import site
import sys
import types

import kubernetes.client.models as k8s
import kubernetes_validate
import yaml


def kserve_models():
    # The SDK's package __init__ starts a model server stack; its generated models need none of it.
    root = next(p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "kserve")))
    pkg = types.ModuleType("kserve")
    pkg.__path__ = [os.path.join(root, "kserve")]
    sys.modules.setdefault("kserve", pkg)
    return {
        "ServingRuntime": importlib.import_module("kserve.models.v1alpha1_serving_runtime").V1alpha1ServingRuntime,
        "InferenceService": importlib.import_module("kserve.models.v1beta1_inference_service").V1beta1InferenceService,
    }


def model_class(name):
    if name.startswith("V1alpha1") or name.startswith("V1beta1"):
        module = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
        return getattr(importlib.import_module("kserve.models." + module), name)
    return getattr(k8s, name)


SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float)}


def check(value, typename, where, errors):
    if typename == "object":
        return
    if typename in SCALARS:
        if not isinstance(value, SCALARS[typename]) or (typename == "int" and isinstance(value, bool)):
            errors.append(f"{where}: expected {typename}, got {type(value).__name__} {value!r}")
        return
    m = re.fullmatch(r"list\[(.+)\]", typename)
    if m:
        if not isinstance(value, list):
            return errors.append(f"{where}: expected a list")
        for i, item in enumerate(value):
            check(item, m.group(1), f"{where}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", typename)
    if m:
        if not isinstance(value, dict):
            return errors.append(f"{where}: expected a map")
        for k, item in value.items():
            check(item, m.group(1), f"{where}.{k}", errors)
        return
    cls = model_class(typename)
    if not isinstance(value, dict):
        return errors.append(f"{where}: expected a {typename} object")
    by_json = {json: attr for attr, json in cls.attribute_map.items()}
    for key, item in value.items():
        if key not in by_json:
            errors.append(f"{where}: unknown field {key!r} for {typename} (known: {', '.join(sorted(by_json))})")
        else:
            check(item, cls.openapi_types[by_json[key]], f"{where}.{key}", errors)


def main(directory):
    kserve = kserve_models()
    failed = False
    for dirpath, _, files in sorted(os.walk(directory)):
        for f in sorted(files):
            if not f.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(dirpath, f)
            with open(path) as fh:
                docs = [d for d in yaml.safe_load_all(fh) if d]
            for doc in docs:
                kind = doc.get("kind")
                errors = []
                if kind in kserve:
                    expected = {"ServingRuntime": "serving.kserve.io/v1alpha1", "InferenceService": "serving.kserve.io/v1beta1"}[kind]
                    if doc.get("apiVersion") != expected:
                        errors.append(f"apiVersion {doc.get('apiVersion')!r}, expected {expected}")
                    check(doc, kserve[kind].__name__, kind, errors)
                    how = "kserve 0.21 SDK models"
                else:
                    try:
                        kubernetes_validate.validate(doc, "1.37", strict=True)
                    except kubernetes_validate.ValidationError as e:
                        errors.append(str(e.message))
                    how = "Kubernetes 1.37 schema, strict"
                status = "ok" if not errors else "INVALID"
                print(f"{path}: {kind} {doc['metadata']['name']}: {status} ({how})")
                for e in errors:
                    print(f"  {e}")
                failed = failed or bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1])
