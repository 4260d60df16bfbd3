"""The object store a Kubeflow job's code and outputs travel through, against a real
S3-compatible server (moto) on 127.0.0.1 that checks every request's signature.

The pod side runs as the init container runs it: ``python -c SOURCE ...`` with only the AWS_*
variables, and ``-I -S`` so that nothing but the standard library can be imported.
"""

from __future__ import annotations

import ast
import datetime
import gzip
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode

from distcomp.errors import UsageError
from distcomp.delivery import fetcher as ps
from distcomp.delivery.store import SOURCE, StoreURI, code_key, download_tree, pack, upload_code
from distcomp.targets.local._ports import free_ports
from tests._s3server import S3Server


def pod(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The pod side as the init container runs it: only the standard library, only ``env``."""
    return subprocess.run([sys.executable, "-I", "-S", "-c", SOURCE, *args], env=env, capture_output=True,
                          text=True, timeout=120)


# What follows an S3 error code: the server's own message, worded as the server (moto) likes.
S3_MESSAGE = r"[^;\n]*[^\s;]"


def one_line_error(text: str) -> str:
    assert "Traceback" not in text
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture
def prefix() -> str:
    """A prefix of the test's own in the session's bucket."""
    return f"t-{uuid.uuid4().hex[:12]}"


def requests_seen(server: S3Server, method: str, fragment: str) -> int:
    """How many ``method`` requests whose path holds ``fragment`` moto has logged."""
    return sum(1 for line in server.log.read_text().splitlines() if f'"{method} ' in line and fragment in line)


# --- requests, signatures, errors ------------------------------------------------------------

ODD_KEYS = ["plain.txt", "a b/c+d~e.txt", "ünï/cödé €.bin", "sym=&?#%.x", "deep/er/still/x"]


def test_put_get_exists_list_round_trip(s3_server: S3Server, prefix: str) -> None:
    env, bucket = s3_server.env(), s3_server.bucket
    for i, name in enumerate(ODD_KEYS):
        ps.put(bucket, f"{prefix}/{name}", f"body {i}".encode(), env)
    assert sorted(ps.list_keys(bucket, f"{prefix}/", env)) == sorted(f"{prefix}/{n}" for n in ODD_KEYS)
    for i, name in enumerate(ODD_KEYS):
        assert ps.get(bucket, f"{prefix}/{name}", env) == f"body {i}".encode()
        assert ps.exists(bucket, f"{prefix}/{name}", env)
    assert not ps.exists(bucket, f"{prefix}/absent", env)
    assert ps.head(bucket, f"{prefix}/plain.txt", env)["content-length"] == str(len(b"body 0"))
    # an independent client agrees on every name and body, both ways
    client = s3_server.boto3()
    assert client.get_object(Bucket=bucket, Key=f"{prefix}/{ODD_KEYS[2]}")["Body"].read() == b"body 2"
    client.put_object(Bucket=bucket, Key=f"{prefix}/from boto3+ü", Body=b"theirs")
    assert ps.get(bucket, f"{prefix}/from boto3+ü", env) == b"theirs"
    status, headers, body = ps.request("GET", bucket, f"{prefix}/plain.txt", env=env)
    assert (status, body) == (200, b"body 0") and "etag" in headers


def test_list_follows_continuation_tokens(s3_server: S3Server, prefix: str) -> None:
    env = s3_server.env()
    for i in range(5):
        ps.put(s3_server.bucket, f"{prefix}/k{i}", b"x", env)
    ps.put(s3_server.bucket, f"{prefix}-other/k", b"x", env)  # a sibling prefix is not under it
    before = requests_seen(s3_server, "GET", "continuation-token=")
    assert ps.list_keys(s3_server.bucket, f"{prefix}/", env, page_size=2) == [f"{prefix}/k{i}" for i in range(5)]
    assert requests_seen(s3_server, "GET", "continuation-token=") - before == 2  # pages 2 and 3 of 3
    assert ps.list_keys(s3_server.bucket, f"{prefix}/none/", env) == []


def test_a_wrong_secret_is_refused_clearly(s3_server: S3Server, prefix: str) -> None:
    ps.put(s3_server.bucket, f"{prefix}/x", b"x", s3_server.env())
    wrong = s3_server.env(AWS_SECRET_ACCESS_KEY="not-the-secret-" + s3_server.secret_key[:8])
    with pytest.raises(ps.StoreError) as info:
        ps.get(s3_server.bucket, f"{prefix}/x", wrong)
    # S3's code is its API; the message after it is the server's prose (moto's, unpinned): present, not quoted
    assert re.fullmatch(rf"S3 GET {re.escape(f'{s3_server.endpoint}/{s3_server.bucket}/{prefix}/x')}: "
                        rf"403 SignatureDoesNotMatch: {S3_MESSAGE}", str(info.value)), str(info.value)
    assert "not-the-secret" not in str(info.value)
    with pytest.raises(ps.StoreError, match=rf"403 InvalidAccessKeyId: {S3_MESSAGE}$"):
        ps.get(s3_server.bucket, f"{prefix}/x", s3_server.env(AWS_ACCESS_KEY_ID="AKIAUNKNOWN0000000000"))
    # submit's side: a usage error saying what to set, in one line
    with pytest.raises(UsageError) as usage:
        upload_code(StoreURI(s3_server.bucket, prefix), b"code", wrong)
    assert "\n" not in str(usage.value) and "not-the-secret" not in str(usage.value)
    assert str(usage.value).startswith(f"uploading the code to s3://{s3_server.bucket}/{prefix}/code/sha256-")
    assert str(usage.value).endswith(": 403 Forbidden; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                                     "AWS_SESSION_TOKEN for temporary credentials) to a key that may read and write "
                                     "this bucket")


def test_temporary_credentials_sign_their_session_token(s3_server: S3Server, prefix: str) -> None:
    env = s3_server.session_env()
    ps.put(s3_server.bucket, f"{prefix}/t", b"temporary", env)
    assert ps.get(s3_server.bucket, f"{prefix}/t", env) == b"temporary"
    with pytest.raises(ps.StoreError, match="400 InvalidToken"):
        ps.get(s3_server.bucket, f"{prefix}/t", s3_server.session_env(AWS_SESSION_TOKEN="forged"))


def test_without_credentials_requests_go_unsigned(s3_server: S3Server, prefix: str) -> None:
    client = s3_server.boto3()
    client.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/public", Body=b"for all", ACL="public-read")
    client.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/private", Body=b"for some")
    anonymous = {"AWS_ENDPOINT_URL_S3": s3_server.endpoint}
    url, headers = ps.prepare(ps.config(anonymous), "GET", s3_server.bucket, f"{prefix}/public")
    assert headers == {"Host": s3_server.endpoint.removeprefix("http://")}
    with s3_server.anonymous():  # moto cannot answer unsigned requests while it checks signatures
        assert ps.get(s3_server.bucket, f"{prefix}/public", anonymous) == b"for all"
        with pytest.raises(ps.StoreError, match=r"^S3 GET http://\S+/private: 403 Forbidden$"):
            ps.get(s3_server.bucket, f"{prefix}/private", anonymous)


def test_server_errors_are_retried_then_reported(s3_server: S3Server, prefix: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """moto answers an unsigned request with a 500 while it checks signatures: a real 5xx."""
    monkeypatch.setattr(ps, "RETRY_DELAYS", (0.0, 0.0))
    before = requests_seen(s3_server, "GET", f"/{prefix}/x ")
    with pytest.raises(ps.StoreError) as info:
        ps.get(s3_server.bucket, f"{prefix}/x", {"AWS_ENDPOINT_URL_S3": s3_server.endpoint})
    assert requests_seen(s3_server, "GET", f"/{prefix}/x ") - before == 3  # the first try and two more
    assert str(info.value).startswith(f"S3 GET {s3_server.endpoint}/{s3_server.bucket}/{prefix}/x: 500 HTTP500: ")
    assert "\n" not in str(info.value) and info.value.status == 500


# Signature V4 test vectors from AWS's documentation of header-based authentication for S3
# (https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html).
AWS_EXAMPLE = ps.Config("us-east-1", "", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")


@pytest.mark.parametrize("url, signature", [
    ("https://examplebucket.s3.amazonaws.com/?lifecycle=",
     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
    ("https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
])
def test_signature_matches_aws_documented_examples(url: str, signature: str) -> None:
    headers = ps.sign(AWS_EXAMPLE, "GET", url, ps.EMPTY_SHA256, "20130524T000000Z")
    assert headers["Authorization"] == ("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                                        f"aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                                        f"Signature={signature}")


@pytest.mark.parametrize("cfg", [
    ps.Config("eu-west-3", "http://127.0.0.1:9000", "AKIDEXAMPLE", "s3cr3t/+="),
    ps.Config("us-east-1", "https://minio.example/s3", "AKIDEXAMPLE", "s3cr3t", token="FwoGZX//token+=="),
    ps.Config("ap-south-1", "", "AKIDEXAMPLE", "s3cr3t"),
    ps.Config("ap-south-1", "https://store.example:443", "AKIDEXAMPLE", "s3cr3t"),
], ids=["endpoint", "path-and-token", "aws", "default-port"])
@pytest.mark.parametrize("method, key, query, body", [
    ("GET", "a b/c+d~e/ünï €.txt", None, b""),
    ("PUT", "code/sha256-0.tar.gz", None, b"some bytes"),
    ("GET", "", {"list-type": "2", "prefix": "out put/é+", "continuation-token": "1/a+b=="}, b""),
    ("PUT", "big", {"partNumber": "3", "uploadId": "x/y+z="}, b"part"),
    ("POST", "big", {"uploads": ""}, b""),
])
def test_signature_matches_botocore(cfg: ps.Config, method: str, key: str, query: Any, body: bytes) -> None:
    """The same request signed by botocore's S3 signer: same host, path, query, signature."""
    now = datetime.datetime(2026, 3, 1, 12, 30, 5, tzinfo=datetime.timezone.utc)
    digest = hashlib.sha256(body).hexdigest()
    url, headers = ps.prepare(cfg, method, "my-bucket", key, query, digest, now)
    # the path and query botocore's S3 client would send
    split = urllib.parse.urlsplit(url)
    quoted = percent_encode(key, safe="/~")
    if cfg.endpoint:
        assert split.path == urllib.parse.urlsplit(cfg.endpoint).path + "/my-bucket" + (f"/{quoted}" if key else "")
    else:
        assert split.path == f"/{quoted}"
    botocore_req = AWSRequest(method=method, url=url.partition("?")[0], params=dict(query or {}))
    signer = S3SigV4Auth(Credentials(cfg.access_key, cfg.secret_key, cfg.token or None), "s3", cfg.region)
    assert split.query == signer.canonical_query_string(botocore_req)
    # botocore signs the same request (its own host from the URL) at the same time
    theirs = AWSRequest(method=method, url=url, data=body,
                        headers={"X-Amz-Content-SHA256": digest, "X-Amz-Date": "20260301T123005Z",
                                 **({"X-Amz-Security-Token": cfg.token} if cfg.token else {})})
    theirs.context["timestamp"] = "20260301T123005Z"
    assert headers["Host"] == signer.headers_to_sign(theirs)["host"]
    signature = signer.signature(signer.string_to_sign(theirs, signer.canonical_request(theirs)), theirs)
    assert headers["Authorization"].endswith(f"Signature={signature}")
    assert f"SignedHeaders={signer.signed_headers(signer.headers_to_sign(theirs))}," in headers["Authorization"]


def test_urls_path_style_with_an_endpoint_else_virtual_hosted() -> None:
    assert ps.url_of(ps.Config(endpoint="http://minio:9000"), "b", "k/x y") == "http://minio:9000/b/k/x%20y"
    assert ps.url_of(ps.Config("eu-west-1"), "bkt", "k/x+y") == "https://bkt.s3.eu-west-1.amazonaws.com/k/x%2By"
    assert ps.url_of(ps.Config("eu-west-1"), "my.bkt", "k") == "https://s3.eu-west-1.amazonaws.com/my.bkt/k"


def test_config_from_the_environment() -> None:
    cfg = ps.config({"AWS_ENDPOINT_URL": "http://a:1/", "AWS_ENDPOINT_URL_S3": "http://s3:2/",
                     "AWS_DEFAULT_REGION": "eu-north-1", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                     "AWS_SESSION_TOKEN": "t"})
    assert cfg == ps.Config("eu-north-1", "http://s3:2", "k", "s", "t")
    assert "'s'" not in repr(cfg) and "'t'" not in repr(cfg)  # the secret and token stay out of reprs
    assert ps.config({"AWS_REGION": "r", "AWS_DEFAULT_REGION": "x", "AWS_ENDPOINT_URL": "https://e"}) == ps.Config(
        "r", "https://e")
    assert ps.config({}) == ps.Config("us-east-1", "")
    with pytest.raises(ps.StoreError, match=r"^AWS_ENDPOINT_URL_S3 is 'minio:9000': give the store's URL, e\.g\. "):
        ps.config({"AWS_ENDPOINT_URL_S3": "minio:9000"})
    with pytest.raises(ps.StoreError, match="^AWS_ENDPOINT_URL holds credentials: give them as AWS_ACCESS_KEY_ID"):
        ps.config({"AWS_ENDPOINT_URL": "http://user:pw@minio:9000"})
    with pytest.raises(ps.StoreError, match="^AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both"):
        ps.config({"AWS_ACCESS_KEY_ID": "k"})


def test_a_missing_bucket_is_one_line_with_a_hint(s3_server: S3Server) -> None:
    with pytest.raises(UsageError) as info:
        upload_code(StoreURI("no-such-bucket", "p"), b"code", s3_server.env())
    text = str(info.value)
    assert "\n" not in text and s3_server.secret_key not in text
    assert re.search(rf": 404 NoSuchBucket: {S3_MESSAGE}; the bucket must exist: create it first "
                     r"\(distcomp does not create buckets\)$", text), text
    with pytest.raises(UsageError, match="^listing s3://no-such-bucket/out: S3 GET .* 404 NoSuchBucket"):
        download_tree(StoreURI("no-such-bucket", "out"), Path("unused"), s3_server.env())


def test_a_server_that_is_down_is_one_line_with_a_hint(s3_server: S3Server, tmp_path: Path) -> None:
    down = s3_server.env(AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{free_ports(1)[0]}")
    with pytest.raises(UsageError) as info:
        upload_code(StoreURI(s3_server.bucket), b"code", down)
    assert str(info.value).endswith("cannot connect: connection refused (is the store up, and is the endpoint "
                                    "right?); set AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) to the store's URL, e.g. "
                                    "http://minio.example:9000, and check that it is up")
    digest = "0" * 64
    run = pod("fetch", s3_server.bucket, "code/x.tar.gz", digest, str(tmp_path / "code"), env=down)
    assert run.returncode == 1 and run.stdout == ""
    assert one_line_error(run.stderr).startswith(f"fetch: S3 GET {down['AWS_ENDPOINT_URL_S3']}/{s3_server.bucket}/"
                                                 "code/x.tar.gz: cannot connect: connection refused")
    assert list((tmp_path / "code").iterdir()) == []


def test_the_pod_command_line(tmp_path: Path) -> None:
    run = pod("fetch", "b", "k", env={})
    assert run.returncode == 2 and run.stderr.startswith("usage: fetch BUCKET KEY SHA256 DEST")
    run = pod("fetch", "b", "k", "not-a-digest", str(tmp_path), env={})
    assert run.returncode == 1
    assert one_line_error(run.stderr) == "fetch: SHA256 is 'not-a-digest': give the archive's sha256, 64 hex digits"
    run = pod("put-tree", str(tmp_path / "absent"), "b", "p", env={})
    assert (run.returncode, one_line_error(run.stderr)) == (1, f"put-tree: {tmp_path}/absent is not a folder: "
                                                               "nothing to upload")


# --- StoreURI, pack, content addressing ------------------------------------------------------

def test_store_uri() -> None:
    assert StoreURI.parse("s3://ml-jobs") == StoreURI("ml-jobs", "")
    assert StoreURI.parse("s3://ml-jobs/team/a/") == StoreURI("ml-jobs", "team/a")
    uri = StoreURI.parse("s3://ml-jobs/team")
    assert (str(uri), uri.key("code", "x"), str(uri.child("outputs", "j1"))) == (
        "s3://ml-jobs/team", "team/code/x", "s3://ml-jobs/team/outputs/j1")
    assert StoreURI("b").key("code", "x") == "code/x"
    for bad, why in [("ml-jobs", "is not an object store location"), ("gs://b/p", "is not an object store location"),
                     ("s3://", "'' is not a bucket name"), ("s3://a/b", "'a' is not a bucket name"),
                     ("s3://my bucket/p", "is not a bucket name"), ("s3://b-1/x//y", "has an empty, '.' or '..'"),
                     ("s3://b-1/x/../y", "has an empty, '.' or '..' part")]:
        with pytest.raises(UsageError, match="give s3://BUCKET or s3://BUCKET/PREFIX, e.g. s3://ml-jobs/distcomp"
                           ) as info:
            StoreURI.parse(bad)
        assert why in str(info.value)


def code_folder(root: Path, greeting: str = "hello") -> dict[str, Path]:
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text("import sys, pathlib\nfrom pkg.words import GREETING\n"
                                   "pathlib.Path(sys.argv[1]).write_text(GREETING)\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "words.py").write_text(f"GREETING = {greeting!r}\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o775)
    return {"train.py": root / "train.py", "pkg/words.py": root / "pkg" / "words.py",
            "pkg/__init__.py": root / "pkg" / "__init__.py", "run.sh": root / "run.sh"}


def test_pack_is_reproducible(tmp_path: Path) -> None:
    files = code_folder(tmp_path / "a")
    first = pack(files)
    os.utime(files["train.py"], (1, 1))  # times are not packed
    (tmp_path / "a" / "pkg" / "words.py").chmod(0o600)  # nor permissions beyond "executable or not"
    assert pack(dict(reversed(list(files.items())))) == first
    assert pack(code_folder(tmp_path / "b")) == first  # the same files elsewhere: the same bytes
    assert pack(code_folder(tmp_path / "c", "bye")) != first
    assert first[:2] == b"\x1f\x8b" and first[4:8] == b"\0\0\0\0"  # gzip, without a timestamp
    assert gzip.decompress(first)  # a whole gzip stream
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["pkg/__init__.py", "pkg/words.py", "run.sh", "train.py"]
    assert {m.name: oct(m.mode) for m in members}["run.sh"] == "0o755"
    assert {oct(m.mode) for m in members if m.name != "run.sh"} == {"0o644"}
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}


def test_pack_refuses_names_outside_the_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    for name in ["../f", "/etc/f", "a/../../f", "", "."]:
        with pytest.raises(UsageError, match="cannot be a path in the code archive: give a path relative to the "):
            pack({name: tmp_path / "f"})
    with pytest.raises(UsageError, match=r"^'\./f' and another name both mean 'f' in the code archive$"):
        pack({"f": tmp_path / "f", "./f": tmp_path / "f"})
    with pytest.raises(UsageError, match=r"absent: cannot be read to pack the code \(No such file or directory\)"):
        pack({"f": tmp_path / "absent"})


def test_unchanged_code_is_not_uploaded_again(s3_server: S3Server, prefix: str, tmp_path: Path) -> None:
    uri, env = StoreURI(s3_server.bucket, prefix), s3_server.env()
    archive = pack(code_folder(tmp_path / "code"))
    first = upload_code(uri, archive, env)
    digest = hashlib.sha256(archive).hexdigest()
    assert (first.key, first.sha256, first.uploaded, first.size) == (
        f"{prefix}/code/sha256-{digest}.tar.gz", digest, True, len(archive))
    assert first.uri == f"s3://{s3_server.bucket}/{prefix}/code/sha256-{digest}.tar.gz"
    assert code_key(uri, digest) == first.key and code_key(StoreURI("b"), "d") == "code/sha256-d.tar.gz"
    assert ps.get(s3_server.bucket, first.key, env) == archive
    puts = requests_seen(s3_server, "PUT", f"/{prefix}/code/")
    again = upload_code(uri, pack(code_folder(tmp_path / "code")), env)  # packed again from the same files
    assert again == first.__class__(first.bucket, first.key, first.sha256, False, first.size)
    assert requests_seen(s3_server, "PUT", f"/{prefix}/code/") == puts  # a HEAD, no upload
    changed = upload_code(uri, pack(code_folder(tmp_path / "code", "changed")), env)
    assert changed.uploaded and changed.key != first.key
    assert sorted(ps.list_keys(s3_server.bucket, f"{prefix}/code/", env)) == sorted([first.key, changed.key])


# --- the pod's fetch ------------------------------------------------------------------------

def test_fetch_in_a_pod_extracts_the_code_and_it_runs(s3_server: S3Server, prefix: str, tmp_path: Path) -> None:
    code = upload_code(StoreURI(s3_server.bucket, prefix), pack(code_folder(tmp_path / "code")), s3_server.env())
    dest = tmp_path / "pod" / "code"
    run = pod("fetch", code.bucket, code.key, code.sha256, str(dest), env=s3_server.env())
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout == (f"fetched s3://{code.bucket}/{code.key} ({code.size} bytes, sha256 verified): 4 files "
                          f"into {dest}\n")
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "pkg/__init__.py", "pkg/words.py", "run.sh", "train.py"]
    assert os.access(dest / "run.sh", os.X_OK) and not os.access(dest / "train.py", os.X_OK)
    ran = subprocess.run([sys.executable, "-E", "-s", "-S", "train.py", str(tmp_path / "out.txt")], cwd=dest,
                         capture_output=True, text=True, timeout=60, env={})
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "out.txt").read_text() == "hello"


def test_fetch_refuses_a_tampered_object(s3_server: S3Server, prefix: str, tmp_path: Path) -> None:
    code = upload_code(StoreURI(s3_server.bucket, prefix), pack(code_folder(tmp_path / "code")), s3_server.env())
    evil = pack(code_folder(tmp_path / "evil", "pwned"))
    s3_server.boto3().put_object(Bucket=code.bucket, Key=code.key, Body=evil)  # replaced behind the job's back
    dest = tmp_path / "pod" / "code"
    run = pod("fetch", code.bucket, code.key, code.sha256, str(dest), env=s3_server.env())
    assert run.returncode == 1 and run.stdout == ""
    assert one_line_error(run.stderr) == (
        f"fetch: s3://{code.bucket}/{code.key} has sha256 {hashlib.sha256(evil).hexdigest()}, not {code.sha256}: "
        "it is not the archive this job was submitted with (changed since?); nothing was extracted")
    assert list(dest.iterdir()) == []


def tar_gz(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info, data


OK = entry("ok.py", data=b"print('ok')")
MALICIOUS = {
    "dotdot": ([OK, entry("../escaped")], "'../escaped': a '..' in its path"),
    "inner-dotdot": ([OK, entry("a/../../escaped")], "'a/../../escaped': a '..' in its path"),
    "absolute": ([OK, entry("/tmp/escaped")], "'/tmp/escaped': an absolute path"),
    "symlink-absolute": ([OK, entry("etc", tarfile.SYMTYPE, "/etc")], "'etc': a link to the absolute path '/etc'"),
    "symlink-up": ([OK, entry("up", tarfile.SYMTYPE, "../..")], "'up': a link to '../..', outside the folder"),
    "symlink-chain": ([OK, entry("sub", tarfile.DIRTYPE), entry("here", tarfile.SYMTYPE, "sub"),
                       entry("out", tarfile.SYMTYPE, "here/../..")],  # lexically inside, not once 'here' is followed
                      "'out': a link to 'here/../..' through another link"),
    "symlink-to-the-folder": ([OK, entry("here", tarfile.SYMTYPE, ".")], "'here': a link to '.', the folder itself"),
    "through-a-link": ([OK, entry("sub", tarfile.DIRTYPE), entry("l", tarfile.SYMTYPE, "sub"), entry("l/x")],
                       "'l/x': a path through the link 'l'"),
    "hardlink-out": ([OK, entry("h", tarfile.LNKTYPE, "../../etc/passwd")],
                     "'h': a link to '../../etc/passwd', outside the folder"),
    "device": ([OK, entry("dev", tarfile.CHRTYPE)], "'dev': a device, pipe or other special file"),
    "fifo": ([OK, entry("pipe", tarfile.FIFOTYPE)], "'pipe': a device, pipe or other special file"),
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_fetch_refuses_a_malicious_archive(s3_server: S3Server, prefix: str, tmp_path: Path, case: str) -> None:
    """Even with the right digest (the attacker uploaded it): nothing is extracted, nothing outside."""
    members, why = MALICIOUS[case]
    archive = tar_gz(*members)
    code = upload_code(StoreURI(s3_server.bucket, prefix), archive, s3_server.env())
    dest = tmp_path / "pod" / "code"
    run = pod("fetch", code.bucket, code.key, code.sha256, str(dest), env=s3_server.env())
    assert run.returncode == 1
    assert one_line_error(run.stderr) == f"fetch: the archive holds {why}; nothing was extracted"
    assert list(dest.iterdir()) == [] and sorted(p.name for p in tmp_path.rglob("*")) == ["code", "pod"]


@pytest.mark.parametrize("use_filter", [True, False], ids=["data-filter", "own-checks"])
@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_extract_refuses_with_or_without_tarfiles_data_filter(tmp_path: Path, case: str, use_filter: bool) -> None:
    """Pythons before the data filter (3.8.17, 3.9.17, ...) rely on the member checks alone."""
    members, why = MALICIOUS[case]
    (tmp_path / "a.tar.gz").write_bytes(tar_gz(*members))
    (tmp_path / "dest").mkdir()
    with pytest.raises(ps.StoreError, match="^the archive holds ") as info:
        ps.extract(str(tmp_path / "a.tar.gz"), str(tmp_path / "dest"), use_filter)
    assert str(info.value) == f"the archive holds {why}; nothing was extracted"
    assert list((tmp_path / "dest").iterdir()) == []


@pytest.mark.parametrize("use_filter", [True, False], ids=["data-filter", "own-checks"])
def test_extract_keeps_links_that_stay_inside(tmp_path: Path, use_filter: bool) -> None:
    archive = tar_gz(entry("pkg", tarfile.DIRTYPE), entry("pkg/a.py", data=b"A = 1\n"),
                     entry("pkg/b.py", tarfile.SYMTYPE, "a.py"), entry("top.py", tarfile.SYMTYPE, "pkg/./a.py"),
                     entry("same.py", tarfile.LNKTYPE, "pkg/a.py"), entry("pkg/tool", data=b"#!/bin/sh\n"))
    archive_path = tmp_path / "a.tar.gz"
    archive_path.write_bytes(archive)
    dest = tmp_path / "dest"
    assert ps.extract(str(archive_path), str(dest), use_filter) == 2  # regular files; links apart
    assert [(dest / n).read_text() for n in ("pkg/b.py", "top.py", "same.py")] == ["A = 1\n"] * 3
    assert (dest / "pkg" / "b.py").is_symlink()


# --- outputs: put-tree in the pod, download_tree at submit -----------------------------------

def test_put_tree_then_download_tree(s3_server: S3Server, prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    files = {"model/weights.bin": os.urandom(70_000), "metrics.json": b'{"loss": 0.1}', "empty": b"",
             "ünï cödé/ré sult+1.txt": "é".encode()}
    for rel, data in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    (out / "dangling").symlink_to(tmp_path / "absent")  # not a file: skipped
    run = pod("put-tree", str(out), s3_server.bucket, f"{prefix}/outputs/", env=s3_server.env())
    assert (run.returncode, run.stderr) == (0, "")
    total = sum(len(d) for d in files.values())
    assert run.stdout == f"uploaded 4 files ({total} bytes) from {out} to s3://{s3_server.bucket}/{prefix}/outputs\n"
    back = tmp_path / "back"
    got = download_tree(StoreURI(s3_server.bucket, f"{prefix}/outputs"), back, s3_server.env())
    assert got == sorted(back / rel for rel in files)
    assert {p.relative_to(back).as_posix(): p.read_bytes() for p in got} == files
    assert sorted(p.name for p in back.rglob(".*")) == []  # no partial files left
    assert download_tree(StoreURI(s3_server.bucket, f"{prefix}/nothing"), tmp_path / "none", s3_server.env()) == []


def test_put_tree_failure_is_one_line(s3_server: S3Server, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f").write_text("x")
    run = pod("put-tree", str(tmp_path / "out"), "no-such-bucket", "p", env=s3_server.env())
    assert run.returncode == 1 and run.stdout == ""
    assert re.fullmatch(rf"put-tree: S3 PUT {re.escape(s3_server.endpoint)}/no-such-bucket/p/f: 404 "
                        rf"NoSuchBucket: {S3_MESSAGE}", one_line_error(run.stderr)), run.stderr


def test_large_files_go_up_in_parts(s3_server: S3Server, prefix: str, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    data = os.urandom(1024) * (11 * 1024)  # 11 MiB: three parts of 5 MiB, 5 MiB, 1 MiB
    big.write_bytes(data)
    key = f"{prefix}/big.bin"
    assert ps.put_file(s3_server.bucket, key, str(big), s3_server.env(), part_size=5 * 1024 * 1024) == len(data)
    assert requests_seen(s3_server, "PUT", f"/{key}?") == 3  # the parts; the single-PUT path has no query
    assert s3_server.boto3().get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == data
    size, digest = ps.download(s3_server.bucket, key, str(tmp_path / "again"), s3_server.env())
    assert (size, digest) == (len(data), hashlib.sha256(data).hexdigest())


def test_download_tree_refuses_keys_that_would_escape(s3_server: S3Server, prefix: str, tmp_path: Path) -> None:
    env = s3_server.env()
    ps.put(s3_server.bucket, f"{prefix}/out/good", b"x", env)
    ps.put(s3_server.bucket, f"{prefix}/out/../../evil", b"x", env)  # a valid S3 key
    with pytest.raises(UsageError) as info:
        download_tree(StoreURI(s3_server.bucket, f"{prefix}/out"), tmp_path / "back", env)
    assert str(info.value) == (f"s3://{s3_server.bucket}/{prefix}/out/../../evil: its name below "
                               f"s3://{s3_server.bucket}/{prefix}/out has an empty, '.' or '..' part, which would not "
                               f"land inside {tmp_path / 'back'}; nothing was downloaded (fetch it by hand)")
    assert not (tmp_path / "back").exists() and not (tmp_path / "evil").exists()
    ps.put(s3_server.bucket, f"{prefix}/clash/a", b"file", env)
    ps.put(s3_server.bucket, f"{prefix}/clash/a/b", b"file below it", env)
    with pytest.raises(UsageError, match=r"'\S+/clash/a' and '\S+/clash/a/b' are a file and a folder of the same "):
        download_tree(StoreURI(s3_server.bucket, f"{prefix}/clash"), tmp_path / "back", env)


# --- the pod side's text --------------------------------------------------------------------

def test_the_pod_side_is_python_38_and_standard_library_only() -> None:
    tree = ast.parse(SOURCE, feature_version=(3, 8))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert imported <= sys.stdlib_module_names | {"__future__"}, imported - sys.stdlib_module_names
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))
    assert SOURCE == Path(ps.__file__).read_text(encoding="utf-8")
