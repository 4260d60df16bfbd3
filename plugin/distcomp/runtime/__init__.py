"""Code that runs inside every rank. Kept import-light: a rank pays for what it uses."""

from ._rankinfo import RankInfo, RankInfoError, rank_info

__all__ = ["RankInfo", "RankInfoError", "rank_info"]
