"""The stdlib fetch step any node runs before its node agent, and the S3 client submit uses:
one self-contained file, standard library only.

A node may hold only Python, so it runs this very text (``store.SOURCE``) as
``python -c "$SOURCE" fetch BUCKET KEY SHA256 DEST`` (a Kubeflow init container: into a volume),
``fetch-into BUCKET KEY SHA256 DEST`` (a Slurm node: into a node-local folder of the job's own,
made whole by a rename) or ``put-tree SRC BUCKET PREFIX`` (a training container's outputs);
submit imports the same functions. Hence: no import from distcomp, nothing newer than Python
3.8, and every failure a one-line message.

Requests are signed with AWS Signature V4 from the usual environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``); without a key they go unsigned,
for a public bucket. With an endpoint (MinIO, Ceph, moto, ...) URLs are path-style.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import os
import re
import shutil
import socket
import ssl
import stat
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass, field
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence, Tuple

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
PART_SIZE = 64 * 1024 * 1024  # a file larger than this goes up in parts (S3 takes 5 GiB in one PUT at most)
TIMEOUT = 60.0  # seconds without a byte from the store
RETRY_DELAYS = (1.0, 3.0)  # after a 5xx answer or a dropped connection; a refused one fails at once
_CHUNK = 1024 * 1024
_USAGE = ("usage: fetch BUCKET KEY SHA256 DEST       (download, verify and extract a tar.gz)\n"
          "       fetch-into BUCKET KEY SHA256 DEST  (the same into a new folder DEST, made whole by a rename)\n"
          "       put-tree SRC BUCKET PREFIX        (upload every file under SRC)")


class StoreError(Exception):
    """One line for the user: the request, the URL, and S3's error code and message.

    ``code`` is S3's error code (or ``NotFound``/``Forbidden``/... for an answer without a
    body, ``ConnectionError``, ``Config``, ``Integrity``, ``Archive``); ``status`` the HTTP
    status, 0 when there was none."""

    def __init__(self, message: str, code: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.code, self.status = code, status


@dataclass(frozen=True)
class Config:
    """Where the store is and who asks; ``access_key`` empty: unsigned requests."""

    region: str = "us-east-1"
    endpoint: str = ""  # scheme://host[:port][/path], no trailing slash; empty: AWS itself
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    token: str = field(default="", repr=False)


def config(env: Mapping[str, str] = os.environ) -> Config:
    """The store settings from the environment, checked."""
    name = "AWS_ENDPOINT_URL_S3" if env.get("AWS_ENDPOINT_URL_S3") else "AWS_ENDPOINT_URL"
    endpoint = env.get(name, "").strip().rstrip("/")
    if endpoint:
        parts = urllib.parse.urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise StoreError(f"{name} is {endpoint!r}: give the store's URL, e.g. http://minio.example:9000",
                             "Config")
        if "@" in parts.netloc:
            raise StoreError(f"{name} holds credentials: give them as AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY instead", "Config")
    region = (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1").strip()
    access, secret = env.get("AWS_ACCESS_KEY_ID", "").strip(), env.get("AWS_SECRET_ACCESS_KEY", "").strip()
    if bool(access) != bool(secret):
        given, missing = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if access else (
            "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID")
        raise StoreError(f"{given} is set but {missing} is not: set both (or neither, for a public bucket)", "Config")
    return Config(region, endpoint, access, secret, env.get("AWS_SESSION_TOKEN", "").strip() if access else "")


# --- signing ---------------------------------------------------------------------------------

def _quote(text: str, safe: str = "~") -> str:
    """S3's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ (and ``safe``) as %XY."""
    return urllib.parse.quote(text, safe=safe)


def _query_string(query: Optional[Mapping[str, str]]) -> str:
    """The canonical query string, which is also the one sent: sorted, each part encoded once."""
    pairs = sorted((_quote(k), _quote(v)) for k, v in (query or {}).items())
    return "&".join(f"{k}={v}" for k, v in pairs)


def url_of(cfg: Config, bucket: str, key: str = "") -> str:
    """``{endpoint}/{bucket}/{key}`` with an endpoint, else AWS's virtual-hosted URL (path-style
    for a bucket with dots, which no wildcard certificate covers)."""
    path_key = _quote(key, safe="/~")
    if cfg.endpoint:
        return f"{cfg.endpoint}/{_quote(bucket)}" + (f"/{path_key}" if key else "")
    if "." in bucket:
        return f"https://s3.{cfg.region}.amazonaws.com/{bucket}" + (f"/{path_key}" if key else "")
    return f"https://{bucket}.s3.{cfg.region}.amazonaws.com/{path_key}"


def _host(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2].lower()
    if (parts.scheme, parts.port) in (("http", 80), ("https", 443)):
        host = host.rsplit(":", 1)[0]
    return host


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def prepare(cfg: Config, method: str, bucket: str, key: str = "", query: Optional[Mapping[str, str]] = None,
            payload_hash: str = EMPTY_SHA256, now: Optional[datetime.datetime] = None) -> Tuple[str, Dict[str, str]]:
    """The URL and headers of one request, signed with Signature V4 unless ``cfg`` has no key.

    ``payload_hash``: the body's sha256 (hex) or ``UNSIGNED_PAYLOAD``."""
    url = url_of(cfg, bucket, key)
    qs = _query_string(query)
    if qs:
        url += "?" + qs
    if not cfg.access_key:
        return url, {"Host": _host(url)}
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    return url, sign(cfg, method, url, payload_hash, stamp)


def sign(cfg: Config, method: str, url: str, payload_hash: str, stamp: str) -> Dict[str, str]:
    """The headers that sign a request to ``url`` (its path and query already in S3's
    canonical encoding, as ``prepare`` makes them) at ``stamp`` (``YYYYMMDDTHHMMSSZ``)."""
    parts = urllib.parse.urlsplit(url)
    host = _host(url)
    signed = {"host": host, "x-amz-content-sha256": payload_hash, "x-amz-date": stamp}
    if cfg.token:
        signed["x-amz-security-token"] = cfg.token
    names = ";".join(sorted(signed))
    canonical = "\n".join([method, parts.path or "/", parts.query,
                           "".join(f"{k}:{signed[k]}\n" for k in sorted(signed)), names, payload_hash])
    scope = f"{stamp[:8]}/{cfg.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    signing_key = _hmac(("AWS4" + cfg.secret_key).encode("utf-8"), stamp[:8])
    for part in (cfg.region, "s3", "aws4_request"):
        signing_key = _hmac(signing_key, part)
    signature = hmac.new(signing_key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    headers = {"Host": host, "X-Amz-Content-SHA256": payload_hash, "X-Amz-Date": stamp,
               "Authorization": f"AWS4-HMAC-SHA256 Credential={cfg.access_key}/{scope}, "
                                f"SignedHeaders={names}, Signature={signature}"}
    if cfg.token:
        headers["X-Amz-Security-Token"] = cfg.token
    return headers


# --- requests --------------------------------------------------------------------------------

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would go to another host with this host's signature: report it instead."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _http_error(method: str, url: str, status: int, headers: Mapping[str, str], body: bytes) -> StoreError:
    code, message, extra = "", "", ""
    try:
        root = ET.fromstring(body) if body.strip() else None
    except ET.ParseError:
        root, message = None, _one_line(body.decode("utf-8", "replace"), 200)
    if root is not None:
        found = {el.tag.rpartition("}")[2]: (el.text or "") for el in root.iter()}
        code, message = found.get("Code", ""), found.get("Message", "")
        if found.get("Endpoint"):
            extra = f" (endpoint: {found['Endpoint']})"
        if found.get("Region"):
            extra = f" (the bucket's region: {found['Region']})"
    if not code:
        code = {301: "PermanentRedirect", 400: "BadRequest", 403: "Forbidden", 404: "NotFound"}.get(
            status, f"HTTP{status}")
    region = headers.get("x-amz-bucket-region")
    if region and not extra:
        extra = f" (the bucket's region: {region})"
    text = f"{code}: {_one_line(message)}" if message else code
    return StoreError(f"S3 {method} {url}: {status} {text}{extra}", code, status)


def _connection_error(method: str, url: str, exc: BaseException) -> StoreError:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ConnectionRefusedError):
        what = "connection refused (is the store up, and is the endpoint right?)"
    elif isinstance(reason, socket.gaierror):
        what = f"cannot resolve the host ({reason.strerror or reason})"
    elif isinstance(reason, (socket.timeout, TimeoutError)):
        what = f"no answer within {TIMEOUT:.0f} s"
    else:
        what = _one_line(str(reason) or type(reason).__name__)
    return StoreError(f"S3 {method} {url}: cannot connect: {what}", "ConnectionError")


def _open(cfg: Config, method: str, bucket: str, key: str = "", body: bytes = b"",
          query: Optional[Mapping[str, str]] = None) -> http.client.HTTPResponse:
    """The open response of a 2xx answer (the caller reads and closes it); a StoreError else.

    Retries 5xx answers and dropped connections, signing each attempt afresh."""
    digest = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
    for attempt in range(len(RETRY_DELAYS) + 1):
        url, headers = prepare(cfg, method, bucket, key, query, digest)
        if method in ("PUT", "POST"):
            headers["Content-Type"] = "application/octet-stream"
        req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None, headers=headers,
                                     method=method)
        retry: Optional[StoreError] = None
        try:
            resp: http.client.HTTPResponse = _OPENER.open(req, timeout=TIMEOUT)
            return resp
        except urllib.error.HTTPError as exc:
            try:
                data = exc.read() if method != "HEAD" else b""
            except OSError:
                data = b""
            finally:
                exc.close()
            err = _http_error(method, url, exc.code, {k.lower(): v for k, v in exc.headers.items()}, data)
            if exc.code < 500:
                raise err from None
            retry = err
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            err = _connection_error(method, url, exc)
            if not isinstance(reason, OSError) or isinstance(
                    reason, (ConnectionRefusedError, socket.gaierror, ssl.SSLCertVerificationError)):
                raise err from None
            retry = err
        if attempt == len(RETRY_DELAYS):
            raise retry from None
        time.sleep(RETRY_DELAYS[attempt])
    raise AssertionError("unreachable")


def _read_all(resp: http.client.HTTPResponse, method: str, url: str) -> bytes:
    try:
        with resp:
            return bytes(resp.read())
    except (OSError, http.client.HTTPException) as exc:
        raise _connection_error(method, url, exc) from None


def request(method: str, bucket: str, key: str = "", body: bytes = b"", query: Optional[Mapping[str, str]] = None,
            env: Mapping[str, str] = os.environ) -> Tuple[int, Dict[str, str], bytes]:
    """One S3 request: (status, headers with lower-case names, body); StoreError unless 2xx."""
    cfg = config(env)
    resp = _open(cfg, method, bucket, key, body, query)
    headers = {k.lower(): v for k, v in resp.headers.items()}
    return resp.status, headers, _read_all(resp, method, resp.url)


def get(bucket: str, key: str, env: Mapping[str, str] = os.environ) -> bytes:
    return request("GET", bucket, key, env=env)[2]


def put(bucket: str, key: str, data: bytes, env: Mapping[str, str] = os.environ) -> None:
    request("PUT", bucket, key, data, env=env)


def head(bucket: str, key: str, env: Mapping[str, str] = os.environ) -> Optional[Dict[str, str]]:
    """The object's headers (``content-length``, ``etag``, ...), or None when there is no such object."""
    try:
        return request("HEAD", bucket, key, env=env)[1]
    except StoreError as exc:
        if exc.status == 404:
            return None
        raise


def exists(bucket: str, key: str, env: Mapping[str, str] = os.environ) -> bool:
    return head(bucket, key, env) is not None


def list_keys(bucket: str, prefix: str = "", env: Mapping[str, str] = os.environ, page_size: int = 1000) -> List[str]:
    """Every key under ``prefix`` (ListObjectsV2, following continuation tokens), in S3's order."""
    keys: List[str] = []
    token = ""
    while True:
        query = {"list-type": "2", "prefix": prefix, "encoding-type": "url", "max-keys": str(page_size)}
        if token:
            query["continuation-token"] = token
        body = request("GET", bucket, "", query=query, env=env)[2]
        try:
            root = ET.fromstring(body)
        except ET.ParseError:
            raise StoreError(f"S3 list of s3://{bucket}/{prefix}: the answer is not S3's XML: "
                             f"{_one_line(body.decode('utf-8', 'replace'), 200)}", "BadAnswer") from None
        truncated, token = False, ""
        for el in root:
            tag = el.tag.rpartition("}")[2]
            if tag == "Contents":
                for sub in el:
                    if sub.tag.rpartition("}")[2] == "Key":
                        keys.append(urllib.parse.unquote_plus(sub.text or ""))  # S3 writes ' ' as '+'
            elif tag == "IsTruncated":
                truncated = (el.text or "").strip() == "true"
            elif tag == "NextContinuationToken":
                token = el.text or ""
        if not truncated or not token:
            return keys


def download(bucket: str, key: str, path: str, env: Mapping[str, str] = os.environ) -> Tuple[int, str]:
    """Stream the object into the file ``path`` (written in place); (bytes, sha256 hex)."""
    cfg = config(env)
    resp = _open(cfg, "GET", bucket, key)
    digest, size = hashlib.sha256(), 0
    try:
        with resp, open(path, "wb") as out:
            while True:
                chunk = resp.read(_CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
    except (socket.timeout, ConnectionError, http.client.HTTPException) as exc:
        raise _connection_error("GET", resp.url, exc) from None
    expected = resp.headers.get("Content-Length")
    if expected is not None and int(expected) != size:
        raise StoreError(f"S3 GET {resp.url}: the download stopped at {size} of {expected} bytes", "ConnectionError")
    return size, digest.hexdigest()


def put_file(bucket: str, key: str, path: str, env: Mapping[str, str] = os.environ, part_size: int = PART_SIZE) -> int:
    """Upload one file: one PUT up to ``part_size`` bytes, a multipart upload above; its size."""
    size = os.path.getsize(path)
    if size <= part_size:
        with open(path, "rb") as f:
            put(bucket, key, f.read(), env)
        return size
    cfg = config(env)
    created = request("POST", bucket, key, query={"uploads": ""}, env=env)[2]
    upload_id = next((el.text or "" for el in ET.fromstring(created).iter() if el.tag.endswith("UploadId")), "")
    if not upload_id:
        raise StoreError(f"S3 POST {url_of(cfg, bucket, key)}?uploads: no UploadId in the answer", "BadAnswer")
    try:
        etags = []
        with open(path, "rb") as f:
            for number in range(1, -(-size // part_size) + 1):
                query = {"partNumber": str(number), "uploadId": upload_id}
                etags.append(request("PUT", bucket, key, f.read(part_size), query, env)[1].get("etag", ""))
        parts = "".join(f"<Part><PartNumber>{n}</PartNumber><ETag>{_xml_text(tag)}</ETag></Part>"
                        for n, tag in enumerate(etags, 1))
        body = f"<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>".encode("utf-8")
        done = request("POST", bucket, key, body, {"uploadId": upload_id}, env)[2]
        if b"<Error>" in done:  # S3 may answer 200 and report the failure in the body
            raise _http_error("POST", url_of(cfg, bucket, key), 200, {}, done)
    except BaseException:
        try:
            request("DELETE", bucket, key, query={"uploadId": upload_id}, env=env)
        except StoreError:
            pass  # the original failure is the one to report
        raise
    return size


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# --- archives --------------------------------------------------------------------------------

def _parts(name: str) -> List[str]:
    return [p for p in name.split("/") if p not in ("", ".")]


def _bad_member(member: tarfile.TarInfo, links: AbstractSet[str]) -> str:
    """Why ``member`` may not be extracted, or "" when it may. ``links``: the archive's symlinks.

    Lexical checks that hold whatever order the members come in: no absolute name, no
    ``..``, no path through one of the archive's symlinks, links that stay inside."""
    name = member.name
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    parts = _parts(name)
    if ".." in parts:
        return "a '..' in its path"
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        return "a device, pipe or other special file"
    if not parts and not member.isdir():
        return "no name"
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in links:
            return f"a path through the link {'/'.join(parts[:i])!r}"
    if member.issym() or member.islnk():
        target = member.linkname
        if target.startswith("/"):
            return f"a link to the absolute path {target!r}"
        stack = parts[:-1] if member.issym() else []  # a hard link's target is named from the root
        steps = _parts(target)
        for i, step in enumerate(steps):
            if step == "..":
                if not stack:
                    return f"a link to {target!r}, outside the folder"
                stack.pop()
                continue
            stack.append(step)
            if (i < len(steps) - 1 or member.islnk()) and "/".join(stack) in links:
                return f"a link to {target!r} through another link"
        if not stack:
            return f"a link to {target!r}, the folder itself"
    return ""


def extract(archive: str, dest: str, use_filter: Optional[bool] = None) -> int:
    """Extract the tar.gz ``archive`` into ``dest``, all or nothing: every member is checked
    first; then tarfile's ``data`` filter (where this Python has it, or ``use_filter``) checks
    again as it extracts. The number of files extracted."""
    if use_filter is None:
        use_filter = hasattr(tarfile, "data_filter")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            links = {"/".join(_parts(m.name)) for m in members if m.issym()}
            for m in members:
                why = _bad_member(m, links) or (_filter_says(m, dest) if use_filter else "")
                if why:
                    raise StoreError(f"the archive holds {m.name!r}: {why}; nothing was extracted", "Archive")
            if use_filter:
                tar.extractall(dest, members, filter="data")
            else:
                for m in members:  # what the data filter would do: no owners kept, no set-id or write bits for others
                    m.mode = (m.mode & 0o755) | (0o700 if m.isdir() else 0o600)
                    m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""
                tar.extractall(dest, members)
            return sum(1 for m in members if m.isfile())
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise StoreError(f"{archive} is not a readable tar.gz archive: {exc}", "Archive") from None


def _filter_says(member: tarfile.TarInfo, dest: str) -> str:
    try:
        tarfile.data_filter(member, dest)
    except tarfile.TarError as exc:  # FilterError and its kinds
        return str(exc)
    return ""


# --- the node's commands ---------------------------------------------------------------------

def fetch(bucket: str, key: str, sha256: str, dest: str, env: Mapping[str, str] = os.environ) -> str:
    """Download, verify and extract a code archive into ``dest``: what happened, in one line."""
    want = sha256.strip().lower()
    if not re.match(r"^[0-9a-f]{64}$", want):
        raise StoreError(f"SHA256 is {sha256!r}: give the archive's sha256, 64 hex digits", "Config")
    os.makedirs(dest, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".podstore-", suffix=".tar.gz", dir=dest)  # dest is writable; / may not be
    os.close(fd)
    try:
        size, got = download(bucket, key, tmp, env)
        if got != want:
            raise StoreError(f"s3://{bucket}/{key} has sha256 {got}, not {want}: it is not the archive this job "
                             "was submitted with (changed since?); nothing was extracted", "Integrity")
        files = extract(tmp, dest)
    finally:
        os.unlink(tmp)
    return f"fetched s3://{bucket}/{key} ({size} bytes, sha256 verified): {files} files into {dest}"


def _own_folder(path: str) -> None:
    """``path`` made (mode 700) or found as a folder of this user's own that nobody else may
    write: a node-local folder under a shared /tmp must not be one another user prepared."""
    try:
        os.makedirs(path, mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise StoreError(f"{path} is not a folder of this user's own that only its owner writes (a link, another "
                         "user's, or group/world-writable): remove it, or give another place", "Config")


def fetch_into(bucket: str, key: str, sha256: str, dest: str, env: Mapping[str, str] = os.environ) -> str:
    """``fetch`` into the new folder ``dest``, which appears whole (a rename of a folder beside
    it) or not at all; its parent is made the user's own. Several tasks on one host (the nodes
    of a one-machine cluster) may ask at once: the first rename wins, the others find it there."""
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    _own_folder(parent)
    if os.path.isdir(dest):
        return f"{dest}: already fetched by another task on this host"
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.", suffix=".part", dir=parent)
    try:
        line = fetch(bucket, key, sha256, tmp, env)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not os.path.isdir(dest):
                raise
            return f"{dest}: already fetched by another task on this host"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return line.replace(f"into {tmp}", f"into {dest}")


def _join(prefix: str, rel: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{rel}" if prefix else rel


def put_tree(src: str, bucket: str, prefix: str, env: Mapping[str, str] = os.environ) -> str:
    """Upload every file under ``src`` to ``prefix/relative-path``: what happened, in one line."""
    if not os.path.isdir(src):
        raise StoreError(f"{src} is not a folder: nothing to upload", "Config")
    config(env)  # a configuration mistake fails before the first file, not after a walk
    files, total = 0, 0
    for root, dirs, names in os.walk(src):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if not os.path.isfile(path):
                continue  # a dangling link, a socket, ...
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            total += put_file(bucket, _join(prefix, rel), path, env)
            files += 1
    return f"uploaded {files} files ({total} bytes) from {src} to s3://{bucket}/{prefix.strip('/')}"


def main(argv: Sequence[str]) -> int:
    """The node's entry: 0 done, 1 failed (one line on stderr), 2 a wrong command line."""
    args = list(argv)
    try:
        if args[:1] == ["fetch"] and len(args) == 5:
            print(fetch(args[1], args[2], args[3], args[4]), flush=True)
        elif args[:1] == ["fetch-into"] and len(args) == 5:
            print(fetch_into(args[1], args[2], args[3], args[4]), flush=True)
        elif args[:1] == ["put-tree"] and len(args) == 4:
            print(put_tree(args[1], args[2], args[3]), flush=True)
        else:
            print(_USAGE, file=sys.stderr)
            return 2
    except (StoreError, OSError) as exc:
        print(f"{args[0]}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a node's log should say what failed in one line, not a traceback
        print(f"{args[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
