"""``python -m distcomp.runtime._probe``: print this rank's RankInfo as JSON (for checking a launcher)."""

import dataclasses
import json

from ._rankinfo import rank_info

if __name__ == "__main__":
    print(json.dumps(dataclasses.asdict(rank_info())), flush=True)
