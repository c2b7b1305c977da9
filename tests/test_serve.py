"""The preview server: path handling, headers, live-reload injection, build events, rebuilds under load."""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from builder import build as build_module
from builder import cli_site
from builder.build import build_site, hash_tree
from builder.preview_events import EVERYTHING, HISTORY, BuildEvents
from builder.preview_http import parse_target, BadPath
from builder.release import project_version
from builder.serve import Preview, changed_files, make_server
from tests.test_build import copy_fixture, fake_chart, fake_estimate

BASE = "/training-memory/"
SECRET = "top secret beside the site"


@contextlib.contextmanager
def running(server):
    """Serve in a thread for the block; yield the port."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def fakes(monkeypatch):
    """The fixture site's fake model and chart renderer for every build, the preview's included."""
    monkeypatch.setattr(build_module, "load_estimate", lambda: fake_estimate)
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: fake_chart)


@pytest.fixture
def site(tmp_path, fakes):
    """A built copy of the fixture site, a secret file beside it and a link from inside to it."""
    paths = copy_fixture(tmp_path)
    build_site(paths, quiet=True)
    (tmp_path / "secret.txt").write_text(SECRET)
    return paths


@pytest.fixture
def served(site):
    """(port, events, paths) of a live-reload server over the built fixture site under BASE."""
    events = BuildEvents()
    with running(make_server(site.out, 0, BASE, events=events)) as port:
        yield port, events, site


def get(port: int, path: str, method: str = "GET", headers: dict | None = None) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one request sent with `path` exactly as given."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest(method, path, skip_accept_encoding=True)
    for name, value in (headers or {}).items():
        connection.putheader(name, value)
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def raw_request(port: int, request_line: bytes) -> bytes:
    """The raw response to a request line http.client would refuse to send (NUL, spaces)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_line + b"\r\nHost: x\r\n\r\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


# Path handling ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    BASE + "%00", BASE + "index.html%00.txt", BASE + "%2e%2e/secret.txt", BASE + "..%2fsecret.txt",
    BASE + "%2E%2E%2Fsecret.txt", BASE + "static/..%2f..%2fsecret.txt", BASE + "static%5c..%5c..%5csecret.txt",
    BASE + "..\\secret.txt", BASE + "../secret.txt", BASE + "./index.html", BASE + "%c0%ae%c0%ae/secret.txt",
    BASE + "%ff", BASE + "%0d%0aSet-Cookie:%20x=1", "index.html",
])
def test_malformed_or_escaping_paths_get_400(served, capsys, path):
    port, _, _ = served
    status, headers, body = get(port, path)
    assert status == 400 and SECRET.encode() not in body
    assert headers["content-type"] == "text/plain; charset=utf-8" and headers["cache-control"] == "no-store"
    assert "Traceback" not in capsys.readouterr().err


def test_a_raw_nul_byte_gets_400_and_the_server_stays_up(served, capsys):
    port, _, _ = served
    response = raw_request(port, b"GET " + BASE.encode() + b"\x00 HTTP/1.1")
    assert response.startswith(b"HTTP/1.0 400") and SECRET.encode() not in response
    assert "Traceback" not in capsys.readouterr().err
    assert get(port, BASE + "index.html")[0] == 200


@pytest.mark.parametrize("request_line, status", [
    (b"GET /a b c HTTP/1.1", b"400"), (b"POST " + BASE.encode() + b" HTTP/1.1", b"501"),
])
def test_malformed_requests_are_refused_with_the_usual_headers(served, capsys, request_line, status):
    port, _, _ = served
    response = raw_request(port, request_line)
    head = response.split(b"\r\n\r\n")[0].lower()
    assert response.startswith(b"HTTP/1.0 " + status) and b"cache-control: no-store" in head
    assert b"content-type: text/plain; charset=utf-8" in head
    assert "Traceback" not in capsys.readouterr().err


def test_a_one_word_request_gets_400_without_a_traceback(served, capsys):
    port, _, _ = served
    assert raw_request(port, b"GARBAGE") == b"400 Bad request syntax ('GARBAGE')\n"  # HTTP/0.9: no headers
    assert "Traceback" not in capsys.readouterr().err


def test_a_link_inside_the_site_to_a_file_outside_is_not_served(served):
    port, _, paths = served
    (paths.out / "leak.txt").symlink_to(paths.out.parent / "secret.txt")
    status, _, body = get(port, BASE + "leak.txt")
    assert status == 404 and SECRET.encode() not in body


def test_no_directory_listing(served):
    port, _, _ = served
    status, headers, body = get(port, BASE + "static/")
    assert status == 404 and b"site.css" not in body and headers["content-type"].startswith("text/html")
    status, headers, _ = get(port, BASE + "static?x=1")
    assert status == 301 and headers["location"] == BASE + "static/?x=1"


def test_404_page_names_the_path_and_links_home(served):
    port, _, _ = served
    status, headers, body = get(port, BASE + "no-such-page.html")
    page = body.decode()
    assert status == 404 and headers["cache-control"] == "no-store"
    assert "<title>Not found</title>" in page and "no-such-page.html" in page and f'href="{BASE}"' in page
    assert get(port, "/index.html")[0] == 404  # outside the base


def test_the_404_page_escapes_the_path(served):
    port, _, _ = served
    _, _, body = get(port, BASE + "%3Cscript%3Ealert(1)%3C/script%3E")
    assert b"<script>alert(1)" not in body


@pytest.mark.parametrize("path, kind", [
    ("index.html", "text/html; charset=utf-8"), ("", "text/html; charset=utf-8"),
    ("static/site.css", "text/css; charset=utf-8"), ("static/widgets.js", "text/javascript; charset=utf-8"),
    ("__preview__/reload.js", "text/javascript; charset=utf-8"), ("__preview__/overlay.css", "text/css; charset=utf-8"),
])
def test_content_types_and_no_store(served, path, kind):
    port, _, _ = served
    status, headers, _ = get(port, BASE + path)
    assert status == 200 and headers["content-type"] == kind
    assert headers["cache-control"] == "no-store" and headers["x-content-type-options"] == "nosniff"


def test_root_and_bare_base_redirect_to_the_base(served):
    port, _, _ = served
    for path in ("/", BASE.rstrip("/"), BASE.rstrip("/") + "?calc=1"):
        status, headers, _ = get(port, path)
        assert status == 302 and headers["location"].startswith(BASE)


def test_head_sends_headers_only(served):
    port, _, paths = served
    status, headers, body = get(port, BASE + "static/site.css", method="HEAD")
    assert status == 200 and body == b""
    assert int(headers["content-length"]) == (paths.out / "static" / "site.css").stat().st_size


# Live reload injection -------------------------------------------------------------------------

def test_served_html_loads_the_reload_script_but_the_file_does_not(served):
    port, _, paths = served
    on_disk = (paths.out / "index.html").read_bytes()
    _, headers, body = get(port, BASE + "index.html")
    tag = f'<script src="{BASE}__preview__/reload.js" defer></script>\n'.encode()
    assert b"__preview__" not in on_disk and body.count(tag) == 1
    assert body.replace(tag, b"") == on_disk and int(headers["content-length"]) == len(body)
    assert body.index(tag) < body.index(b"</head>")
    assert get(port, BASE + "static/site.css")[2] == (paths.out / "static" / "site.css").read_bytes()


def test_without_live_reload_pages_are_served_byte_for_byte(site):
    with running(make_server(site.out, 0, BASE)) as port:
        assert get(port, BASE + "index.html")[2] == (site.out / "index.html").read_bytes()
        assert get(port, BASE + "__preview__/reload.js")[0] == 404
        assert b"__preview__" not in get(port, BASE + "missing.html")[2]


def test_serving_leaves_the_built_site_byte_identical(tmp_path, fakes):
    clean = copy_fixture(tmp_path / "clean")
    build_site(clean, quiet=True)
    previewed = copy_fixture(tmp_path / "previewed")
    preview = Preview(previewed, quiet=True)
    with running(make_server(previewed.out, 0, BASE, events=preview.events)) as port:
        assert preview.build()
        for page in ("", "index.html", "references.html", "static/site.css", "__preview__/reload.js"):
            assert get(port, BASE + page)[0] == 200
        page = previewed.content / "index.md"
        page.write_text(page.read_text().replace("Intro paragraph", "Edited paragraph"))
        assert preview.build()
        assert get(port, BASE + "index.html")[0] == 200
    page = clean.content / "index.md"
    page.write_text(page.read_text().replace("Intro paragraph", "Edited paragraph"))
    build_site(clean, quiet=True)
    assert hash_tree(previewed.out) == hash_tree(clean.out)
    assert not any(b"__preview__" in path.read_bytes() for path in previewed.out.rglob("*") if path.is_file())


# Build events -----------------------------------------------------------------------------------

def read_events(response, count: int) -> list[tuple[str, dict]]:
    """The next `count` (event, data) pairs of an open event stream (comments skipped)."""
    found, event, data = [], None, None
    while len(found) < count:
        line = response.fp.readline().decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and event:
            found.append((event, data))
            event = data = None
    return found


def open_stream(port: int, last_event_id: str | None = None):
    """An open connection to the event stream."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", BASE + "__preview__/events", headers={"Last-Event-ID": last_event_id} if last_event_id else {})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream; charset=utf-8"
    return connection, response


def test_a_good_build_sends_the_changed_pages_and_a_bad_one_every_error(served):
    port, events, paths = served
    preview = Preview(paths, quiet=True, events=events)
    connection, stream = open_stream(port)
    try:
        assert read_events(stream, 1) == [("hello", {"server": events.server, "errors": []})]
        page = paths.content / "index.md"
        good = page.read_text()
        page.write_text(good.replace("Intro paragraph", "Edited paragraph"))
        assert preview.build()
        assert read_events(stream, 1) == [("built", {"changed": ["index.html", f"v/{project_version()}/index.html"]})]
        page.write_text(good.replace("{{< widget bytes-per-param", "{{< widget sparkles")
                        .replace("[@korthikanti2022;", "[@nobody2020;"))
        assert not preview.build()
        (event, data), = read_events(stream, 1)
        assert event == "failed" and len(data["errors"]) == 2
        assert data["errors"][0].startswith(f"{page}:") and "unknown citation key 'nobody2020'" in data["errors"][0]
        assert data["errors"][1].startswith(f"{page}:") and "unknown widget" in data["errors"][1]
        assert "Edited paragraph" in get(port, BASE + "index.html")[2].decode()  # the last good page stays
        page.write_text(good.replace("Intro paragraph", "Edited paragraph"))
        assert preview.build()
        assert read_events(stream, 1) == [("built", {"changed": []})]  # clears the overlay, no reload
    finally:
        connection.close()


def test_a_page_opened_while_the_build_is_broken_sees_the_errors(served):
    port, events, _ = served
    events.publish(errors=["content/index.md:4: front matter: order must be an integer"])
    connection, stream = open_stream(port)
    try:
        assert read_events(stream, 1)[0][1]["errors"] == ["content/index.md:4: front matter: order must be an integer"]
    finally:
        connection.close()


def test_a_reconnecting_page_gets_what_it_missed(served):
    port, events, _ = served
    seen = f"{events.server}:{events.latest.number}"
    events.publish(changed=["index.html"])
    events.publish(changed=["static/site.css"])
    connection, stream = open_stream(port, last_event_id=seen)
    try:
        assert read_events(stream, 2)[1] == ("built", {"changed": ["index.html", "static/site.css"]})
    finally:
        connection.close()


def test_a_stream_far_behind_reloads_everything():
    events = BuildEvents()
    for _ in range(HISTORY + 2):
        events.publish(changed=["a.html"])
    assert EVERYTHING in events.wait_after(0, timeout=0).changed
    assert events.wait_after(events.latest.number, timeout=0) is None


def test_closing_the_events_ends_the_streams():
    events = BuildEvents()
    finished = threading.Event()
    threading.Thread(target=lambda: (list(events.stream(0, keepalive=0.05)), finished.set()), daemon=True).start()
    events.close()
    assert finished.wait(2)


def test_changed_files_lists_added_removed_and_changed():
    assert changed_files({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9", "d": "4"}) == ["b", "c", "d"]


# Rebuilds under load, and after failures --------------------------------------------------------

def test_requests_during_rebuilds_never_miss_a_file(served):
    port, _, paths = served
    stop, failures, counts = threading.Event(), [], []

    def fetch() -> None:
        done = 0
        while not stop.is_set():
            for page in ("index.html", "references.html", "static/site.css"):
                status = get(port, BASE + page)[0]
                if status != 200:
                    failures.append(f"{status} {page}")
                done += 1
        counts.append(done)

    clients = [threading.Thread(target=fetch) for _ in range(3)]
    for client in clients:
        client.start()
    try:
        for _ in range(12):
            build_site(paths, quiet=True, force=True)
    finally:
        stop.set()
        for client in clients:
            client.join()
    assert failures == [] and sum(counts) > 30


def test_the_server_stays_up_after_failed_builds(served, capsys):
    port, events, paths = served
    preview = Preview(paths, quiet=True, events=events)
    page = paths.content / "index.md"
    good = page.read_text()
    page.write_text(good.replace("order: 1", "order: first"))
    for _ in range(3):
        assert not preview.build()
    err = capsys.readouterr().err
    assert "index.md:4: front matter: order must be an integer" in err and "still serving the previous site" in err
    assert get(port, BASE + "index.html")[0] == 200
    page.write_text(good)
    assert preview.build() and events.latest.errors == ()


def test_a_crash_in_the_builder_is_reported_and_serving_goes_on(served, monkeypatch, capsys):
    port, events, paths = served
    monkeypatch.setattr("builder.serve.build_site", lambda *a, **k: 1 / 0)
    assert not Preview(paths, quiet=True, events=events).build()
    assert events.latest.errors == ("the builder stopped: ZeroDivisionError: division by zero",)
    assert get(port, BASE + "index.html")[0] == 200


# Parsing and the command line -------------------------------------------------------------------

def test_parse_target_keeps_the_query_on_redirects_and_strips_the_base():
    assert parse_target("/docs?x=1", "/docs/").redirect == "/docs/?x=1"
    target = parse_target("/docs/static/a%20b.css?v=2", "/docs/")
    assert target.relative == "static/a b.css" and not target.folder
    assert parse_target("/other/x", "/docs/").outside
    with pytest.raises(BadPath):
        parse_target("/docs/%2e%2E/x", "/docs/")


@pytest.mark.parametrize("flags, message", [
    (["--base", "/a b/"], "is not a URL sub-path"), (["--base", "/x/../y"], "is not a URL sub-path"),
    (["--port", "70000"], "70000 is not a port number (0 to 65535)"), (["--port", "http"], "'http' is not a port number"),
])
def test_bad_serve_flags_exit_2_naming_the_flag(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_site.main(["serve", *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flags[0]}" in err and message in err and "Traceback" not in err


def test_serve_refuses_a_port_in_use_with_exit_2(tmp_path, fakes, capsys):
    paths = copy_fixture(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli_site.main(["serve", "--content", str(paths.content), "--static", str(paths.static),
                              "--out", str(paths.out), "--port", str(port)])
    assert code == 2 and f"--port {port}: cannot listen" in capsys.readouterr().err


def test_base_flag_is_normalised():
    assert cli_site.base_path("training-memory") == "/training-memory/"
    assert cli_site.base_path("/") == "/" and cli_site.base_path("/a/b/") == "/a/b/"


def test_serve_binds_loopback_by_default():
    args = cli_site.make_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1" and args.live and not args.poll


def test_a_rebuild_of_unchanged_inputs_reports_nothing_changed(served):
    port, events, paths = served
    preview = Preview(paths, quiet=True, events=events)
    time.sleep(0)  # same inputs as the fixture's build
    assert preview.build() and events.latest.changed == ()
    shutil.rmtree(paths.out / "static")
    assert preview.build() and "static/site.css" in events.latest.changed  # a damaged output is rebuilt


def test_the_swap_never_leaves_the_site_folder_missing(tmp_path, fakes, monkeypatch):
    paths = copy_fixture(tmp_path)
    build_site(paths, quiet=True)
    missing, rename = [], Path.rename

    def watched_rename(self, target):
        result = rename(self, target)
        if not paths.out.exists():
            missing.append(f"{self.name} -> {Path(target).name}")
        return result

    monkeypatch.setattr(Path, "rename", watched_rename)
    build_site(paths, quiet=True, force=True)
    assert missing == [] and (paths.out / "index.html").is_file()


def test_a_change_to_the_builders_code_restarts_instead_of_building(site, monkeypatch):
    from builder.build import PACKAGE_DIR

    restarts = []
    preview = Preview(site, quiet=True, on_code_change=restarts.append)
    monkeypatch.setattr(preview, "build", lambda: pytest.fail("built with the code already imported"))
    preview.on_change({str(PACKAGE_DIR / "render.py"), str(site.content / "index.md")})
    assert restarts == [[PACKAGE_DIR / "render.py"]]


def test_a_syntax_error_in_the_builders_code_is_shown_not_restarted(site, tmp_path, monkeypatch, capsys):
    import builder.serve as serve_module

    code = tmp_path / "builder"
    code.mkdir()
    (code / "render.py").write_text("def f():\n    return (\n")
    monkeypatch.setattr(serve_module, "PACKAGE_DIR", code)
    restarts = []
    preview = Preview(site, quiet=True, on_code_change=restarts.append)
    preview.on_change({str(code / "render.py")})
    assert restarts == [] and len(preview.events.latest.errors) == 1
    assert preview.events.latest.errors[0].endswith("render.py:2: '(' was never closed")
    assert preview.events.latest.errors[0] in capsys.readouterr().err


def test_restart_keeps_the_command_line_and_the_port(monkeypatch):
    import builder.serve as serve_module

    monkeypatch.setattr(serve_module.sys, "orig_argv", ["python", "-m", "builder", "serve", "--port", "0"])
    assert serve_module.restart_command(41234) == ["python", "-m", "builder", "serve", "--port", "0", "--port", "41234"]
