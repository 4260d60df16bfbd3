"""A real S3-compatible server on 127.0.0.1 for the tests: moto's ``moto_server``, with request
authentication ENFORCED, so a request signed wrongly (or with an unknown key) is refused as
S3 would refuse it.

moto checks signatures only once its "initial no-auth action count" is used up. The server
starts with that count unlimited; an IAM user, its access key and policy (s3:*) and the
bucket are created through moto's IAM and S3 APIs with boto3; then ``/moto-api/reset-auth``
sets the count to 0, and from there every request must carry a valid Signature V4 of that
user's key. The server is one per session, ended by its own pid (its process group).

Every test may ask for ``s3_server``: tests/conftest.py loads this module as a plugin (one
server per session, not one per module that imports the fixture).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from distcomp.targets.local._ports import free_ports
from tests._procs import stop_group

REGION = "us-east-1"
BUCKET = "distcomp-test"
_POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str
    secret_key: str
    bucket: str  # created, empty at the start of the session
    pid: int
    log: Path  # moto's request log: one line per request
    session: tuple[str, str, str]  # temporary credentials of an assumed role: key, secret, session token

    def env(self, **extra: str) -> dict[str, str]:
        """The AWS_* variables a client of this store needs (and ``extra``)."""
        return {"AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": REGION, **extra}

    def session_env(self, **extra: str) -> dict[str, str]:
        """As ``env()``, with the temporary credentials (AWS_SESSION_TOKEN included)."""
        key, secret, token = self.session
        return self.env(**{"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token,
                           **extra})

    def boto3(self) -> Any:
        """boto3's own S3 client for this store: an independent reader and writer for the tests."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)

    @contextmanager
    def anonymous(self) -> Iterator[None]:
        """Authentication off for a while (moto cannot serve unsigned requests while enforcing it)."""
        _set_auth(self.endpoint, "inf")
        try:
            yield
        finally:
            _set_auth(self.endpoint, "0")


def _set_auth(endpoint: str, count: str) -> None:
    # text/plain: moto reads the raw body, which a form content type would hide from it
    req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=count.encode(), method="POST",
                                 headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert json.load(r)["status"] == "ok"


def _up(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _setup(endpoint: str) -> tuple[tuple[str, str], tuple[str, str, str]]:
    """The user, its key and policy, a role and a session of it, and the bucket, made while no
    request is checked yet."""
    import boto3

    kw = {"endpoint_url": endpoint, "region_name": REGION, "aws_access_key_id": "setup",
          "aws_secret_access_key": "setup"}
    iam = boto3.client("iam", **kw)
    iam.create_user(UserName="distcomp")
    key = iam.create_access_key(UserName="distcomp")["AccessKey"]
    iam.put_user_policy(UserName="distcomp", PolicyName="s3", PolicyDocument=json.dumps(_POLICY))
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                      "Principal": {"AWS": "*"}}]}
    role = iam.create_role(RoleName="distcomp", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    iam.put_role_policy(RoleName="distcomp", PolicyName="s3", PolicyDocument=json.dumps(_POLICY))
    temp = boto3.client("sts", **kw).assume_role(RoleArn=role["Arn"], RoleSessionName="test")["Credentials"]
    boto3.client("s3", **kw).create_bucket(Bucket=BUCKET)
    return ((key["AccessKeyId"], key["SecretAccessKey"]),
            (temp["AccessKeyId"], temp["SecretAccessKey"], temp["SessionToken"]))


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    home = tmp_path_factory.mktemp("s3")
    port = free_ports(1)[0]
    endpoint = f"http://127.0.0.1:{port}"
    log = home / "moto.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                                cwd=home, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not _up(endpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        (access, secret), session = _setup(endpoint)
        _set_auth(endpoint, "0")
        yield S3Server(endpoint, access, secret, BUCKET, proc.pid, log, session)
    finally:
        stop_group(proc)
