"""A run is a pure function of its seed: the same cases whatever else the process has imported.

Hypothesis seeds some draws with constants it finds in local modules; the harness's searches must
not depend on them, or the same check would see different cases in the CLI, a script, or an xdist
worker that happened to import other test modules.
"""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "with-constants":
    import lots_of_constants  # a local module full of literals
import specverify
result = specverify.check(specverify.reference, budget="quick", seed=7, \
select=["fit.conditional[random]", "robustness.edge[zeros]"])
print(json.dumps([(c.id, c.status, c.p_value, c.samples, c.evidence.get("examples")) for c in result.checks]))
"""


def test_checks_do_not_depend_on_local_modules(tmp_path):
    literals = ", ".join(str(i * 7919 % 1009) for i in range(300))
    floats = ", ".join(repr(i / 97) for i in range(300))
    (tmp_path / "lots_of_constants.py").write_text(
        f"INTS = ({literals})\nFLOATS = ({floats})\nBYTES = b'\\x01\\x02\\x03\\xff'\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path), mode], capture_output=True, text=True, check=True, timeout=600
        )
        for mode in ("plain", "with-constants")
    ]
    plain, with_constants = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert plain == with_constants
