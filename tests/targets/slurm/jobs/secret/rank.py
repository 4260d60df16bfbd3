"""A rank handed secrets: rank 0 checks they arrived whole and ends well; rank 1 prints them and fails."""

import argparse
import hashlib
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--pw", required=True)
p.add_argument("--pw-eq", required=True)
p.add_argument("--pw-sha", required=True)
p.add_argument("--out", required=True)
args = p.parse_args()
if int(os.environ["RANK"]) == 0:
    whole = (hashlib.sha256(args.pw.encode()).hexdigest() == args.pw_sha and args.pw_eq == args.pw
             and os.environ.get("API_TOKEN") == "tok-Env-S3cret-77")
    print(f"rank 0: the secrets arrived {'whole' if whole else 'changed'}", flush=True)
    sys.exit(0 if whole else 4)
time.sleep(3)  # rank 0 has ended well: rank 1 is the root cause
print(f"argv {sys.argv[1:]}", flush=True)
print(f"password:\n{args.pw}", flush=True)
print(f"token {os.environ['API_TOKEN']}", flush=True)
sys.exit(3)
