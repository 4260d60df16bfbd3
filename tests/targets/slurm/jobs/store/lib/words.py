"""A module in a subfolder of the code: it is there only if the whole folder travelled."""

GREETING = "fetched whole"
