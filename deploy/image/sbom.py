"""The image's SBOM as CycloneDX 1.5 JSON, from the package lists the build took inside the root
filesystem (dpkg-query for Debian, importlib.metadata for Python). Deterministic: no clock, a serial
number derived from the content, components sorted."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from urllib.parse import quote


def debian(path: str) -> list[dict[str, object]]:
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        name, version, arch, source = [*line.split("\t"), "", "", ""][:4]
        purl = f"pkg:deb/debian/{name}@{quote(version, safe='')}?arch={arch}"
        if source and source != name:
            purl += f"&upstream={quote(source, safe='')}"
        out.append({"type": "library", "name": name, "version": version, "purl": purl, "bom-ref": purl})
    return out


def python(path: str) -> list[dict[str, object]]:
    out = []
    for p in json.loads(Path(path).read_text(encoding="utf-8")):
        purl = f"pkg:pypi/{p['name'].lower().replace('_', '-')}@{p['version']}"
        component: dict[str, object] = {
            "type": "library",
            "name": p["name"],
            "version": p["version"],
            "purl": purl,
            "bom-ref": purl,
        }
        if p.get("license") and len(p["license"]) < 100:
            component["licenses"] = [{"expression": p["license"]}]
        out.append(component)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", required=True)
    ap.add_argument("--created", required=True)
    ap.add_argument("--debian", required=True)
    ap.add_argument("--python", required=True)
    a = ap.parse_args()
    components = sorted(debian(a.debian) + python(a.python), key=lambda c: str(c["purl"]))
    body = json.dumps(components, sort_keys=True)
    doc = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'makeroom-image:' + body)}",
        "version": 1,
        "metadata": {
            "timestamp": a.created,
            "component": {
                "type": "container",
                "name": "makeroom",
                "version": a.version,
                "bom-ref": f"makeroom-image@{a.version}",
            },
        },
        "components": components,
    }
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
