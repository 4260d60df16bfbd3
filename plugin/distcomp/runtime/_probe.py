"""``python -m distcomp.runtime._probe``: print this rank's RankInfo as JSON (for checking a launcher)."""

import dataclasses
import json
import sys

from ._rankinfo import rank_info

if __name__ == "__main__":
    # one write(): with PYTHONUNBUFFERED, print() writes the text and "\n" apart, and ranks
    # sharing a stdout could interleave between the two
    sys.stdout.write(json.dumps(dataclasses.asdict(rank_info())) + "\n")
    sys.stdout.flush()
