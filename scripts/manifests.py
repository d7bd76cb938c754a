#!/usr/bin/env python3
"""Helpers of scripts/check-deploy.sh (run with the tools' Python, which has PyYAML).

  crd-schema CRD VERSION OUT   the CRD's openAPIV3Schema for VERSION as a JSON Schema,
                               made strict: an object that lists its properties
                               accepts no others (as the API server's strict field
                               validation rejects unknown fields).
  extract KIND RENDERED DIR    writes each document of kind KIND in RENDERED (a
                               multi-document YAML stream) to DIR/<name>.json; prints
                               how many.
  docker-context OUT           copies the files of the repository's build context,
                               as .dockerignore selects them, into OUT.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import yaml


def strict(schema):
    if isinstance(schema, dict):
        for value in schema.values():
            strict(value)
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        for item in schema:
            strict(item)
    return schema


def crd_schema(crd_path, version, out):
    with open(crd_path) as f:
        crd = next(d for d in yaml.safe_load_all(f) if d)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            schema = strict(v["schema"]["openAPIV3Schema"])
            break
    else:
        sys.exit(f"{crd_path}: no version {version}")
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    with open(out, "w") as f:
        json.dump(schema, f)


def extract(kind, rendered, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    count = 0
    with open(rendered) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == kind:
                name = doc["metadata"]["name"]
                with open(os.path.join(out_dir, f"{name}.json"), "w") as out:
                    json.dump(doc, out)
                count += 1
    print(count)


def ignored(path, rules):
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negate, pattern in rules:
        if any(matches(pattern, p) for p in prefixes):
            excluded = not negate
    return excluded


def matches(pattern, path):
    # `**` spans directories; `*` and `?` stay within one path element.
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    return re.fullmatch(regex, path) is not None


def docker_context(out):
    rules = []
    with open(".dockerignore") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = os.path.normpath(line.lstrip("!")).lstrip("/")
            rules.append((negate, pattern))
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    for path in filter(None, files):
        if os.path.isfile(path) and not ignored(path, rules):
            target = os.path.join(out, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"crd-schema": crd_schema, "extract": extract, "docker-context": docker_context}[
        command
    ](*args)
