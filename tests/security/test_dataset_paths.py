"""Dataset imports that try to read what is not the dataset's, and uploads that broke the
server (issue 29, items 4 and 10).

Before the fix a generic dataset's `table`, a WikiTQ `context`, TabFact's `table_id`,
Spider's `database` and FeTaQA's `feta_id` were joined to the dataset's folder as given:
absolute paths, `..` and symlinks read `secret.key`, `/etc/passwd` and `/proc/self/environ`
back through SQL (a Spider DDL's table name too), and a `feta_id` or Spider database with
`/` wrote outside the dataset's folder. Hostile uploads (FeTaQA without `table_array`, rows
that are not lists, a 300-character `feta_id`, text that is not UTF-8...) answered 500 and
left table files behind. Now every file an example names goes through `SourcePaths`
(relative to the dataset's own folder, nothing outside it, nothing of the data directory's
own), ids that name files are refused unless they are a safe file name, and a refused
import is a 400 naming the line and field that leaves no dataset, no source and no file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from dagwright.data.connectors.common import SourcePaths
from dagwright.evaluation.datasets import DatasetFormatError, read_dataset
from support.probe import health_probe
from support.server import Api, ServerProcess, error_of, subprocess_environment

FIXTURES = Path(__file__).parents[1] / "fixtures" / "evaluation"


@pytest.fixture(scope="module")
def packs(server_process: ServerProcess) -> Path:
    """Under the server's source root: a pack folder of each kind, and beside them another
    folder whose file a dataset must not reach with `..` either."""
    root = server_process.data_dir.resolve() / "sources" / "packs"
    root.mkdir(parents=True, exist_ok=True)
    for kind in ("wikitq", "tabfact", "spider"):
        shutil.copytree(FIXTURES / kind, root / kind, dirs_exist_ok=True)
    (root / "generic").mkdir(exist_ok=True)
    (root / "generic" / "cities.csv").write_text("city,people\nOslo,700000\n")
    (root / "other").mkdir(exist_ok=True)
    (root / "other" / "private.csv").write_text("who,salary\nAda,100\n")
    return root


def dataset_left(server: ServerProcess, api: Api, name: str) -> list[str]:
    """What a refused import left behind (nothing, when it is refused whole)."""
    left = []
    if api.http.get(f"/api/v1/datasets/{name}").status_code != 404:
        left.append("the dataset")
    sources = {s["name"] for s in api.http.get("/api/v1/sources").json()}
    left += sorted(s for s in sources if s.startswith((f"eval_{name}", f"{name}_")))
    folder = server.data_dir / "sources" / "eval-datasets"
    left += [str(p) for p in folder.glob(f"{name}/**/*")]
    left += [str(p) for p in folder.glob(".import-*")]
    return left


def refused(response: httpx.Response, line: int, field: str) -> dict[str, Any]:
    error = error_of(response, 400)
    assert error["code"] == "invalid_dataset", error
    assert error["line"] == line, error
    assert error["field"] == field, error
    assert f"line {line}" in error["message"], error
    assert repr(field) in error["message"], error
    return error


# -- files named by an imported dataset -------------------------------------------------------

ESCAPES = {
    "absolute": "/etc/passwd",
    "secret_key": "../../../secret.key",  # packs/<kind>/ -> the data directory
    "environ": "/proc/self/environ",
    "sibling": "../other/private.csv",
    "symlink": "link.csv",  # -> /etc/passwd, planted beside the dataset
}


def write_pack(packs: Path, kind: str, name: str, reference: str) -> tuple[Path, int, str]:
    """A dataset file of `kind` whose second example names `reference`; the file, the line
    and the field the refusal must name."""
    folder = packs / kind
    link = folder / "link.csv"
    if not link.is_symlink():
        link.symlink_to("/etc/passwd")
    if kind == "generic":
        lines = [
            {"id": 1, "question": "q1", "answer": "1", "table": "cities.csv"},
            {"id": 2, "question": "q2", "answer": "2", "table": reference},
        ]
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path, 2, "table"
    if kind == "wikitq":
        path = folder / f"{name}.tsv"
        path.write_text(
            "id\tutterance\tcontext\ttargetValue\n"
            "nt-1\tq1\tcsv/203-csv/165.csv\t4\n"
            f"nt-2\tq2\t{reference}\t5\n"
        )
        return path, 3, "context"
    if kind == "tabfact":
        # TabFact joins all_csv/<table_id>: one more level to climb.
        given = reference if reference.startswith("/") else f"../{reference}"
        lines = [
            {"table_id": "2-111774-2.html.csv", "statement": "s1", "label": 1},
            {"table_id": given, "statement": "s2", "label": 0},
        ]
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path, 2, "table_id"
    raise AssertionError(kind)


@pytest.mark.parametrize("escape", sorted(ESCAPES))
@pytest.mark.parametrize("kind", ["generic", "wikitq", "tabfact"])
def test_a_table_outside_the_datasets_folder_is_refused(
    server_process: ServerProcess, api: Api, packs: Path, kind: str, escape: str
) -> None:
    name = f"esc_{kind}_{escape}"
    path, line, field = write_pack(packs, kind, name, ESCAPES[escape])
    with health_probe(server_process.base_url):
        response = api.http.post(
            "/api/v1/datasets", json={"name": name, "kind": kind, "path": str(path)}
        )
    error = refused(response, line, field)
    assert "root:" not in error["message"]  # nothing of the file read comes back
    assert dataset_left(server_process, api, name) == []


def test_a_table_beside_the_dataset_is_still_read(
    server_process: ServerProcess, api: Api, packs: Path
) -> None:
    """The control: the policy refuses escapes, not tables."""
    path = packs / "generic" / "fine.jsonl"
    path.write_text(json.dumps({"id": 1, "question": "q", "answer": "1", "table": "cities.csv"}))
    response = api.http.post(
        "/api/v1/datasets", json={"name": "fine", "kind": "generic", "path": str(path)}
    )
    assert response.status_code == 201, response.text
    answer = api.http.post("/api/v1/query", json={"sql": "SELECT people FROM eval_fine.tcities"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [{"people": 700000}], answer.text


@pytest.mark.parametrize("third", ["../other/private.csv", "missing.csv"])
def test_a_refused_import_into_an_existing_dataset_changes_nothing(
    server_process: ServerProcess, api: Api, packs: Path, third: str
) -> None:
    """A second split whose third line escapes: the tables its first lines named are not
    added, the dataset keeps its split, its source and its files as they were."""
    name = "kept_escape" if third.startswith("..") else "kept_missing"
    folder = packs / "generic"
    (folder / "towns.csv").write_text("town,people\nBergen,280000\n")
    first = folder / "kept.jsonl"
    first.write_text(json.dumps({"id": 1, "question": "q", "answer": "1", "table": "cities.csv"}))
    response = api.http.post(
        "/api/v1/datasets",
        json={"name": name, "kind": "generic", "path": str(first), "split": "dev"},
    )
    assert response.status_code == 201, response.text
    tables = server_process.data_dir / "sources" / "eval-datasets" / name / "tables"
    before = sorted(p.name for p in tables.iterdir())
    second = folder / "kept_train.jsonl"
    lines = [
        {"id": 1, "question": "q", "table": "towns.csv"},
        {"id": 2, "question": "q", "table": "cities.csv"},
        {"id": 3, "question": "q", "table": third},
    ]
    second.write_text("".join(json.dumps(line) + "\n" for line in lines))
    response = api.http.post(
        "/api/v1/datasets",
        json={"name": name, "kind": "generic", "path": str(second), "split": "train"},
    )
    assert api.http.get(f"/api/v1/datasets/{name}").json()["splits"] == {"dev": 1}
    assert sorted(p.name for p in tables.iterdir()) == before == ["tcities.csv"]
    assert not list(tables.parent.parent.glob(".import-*"))
    refused(response, 3, "table")


@pytest.mark.parametrize(
    ("database", "field"), [("../../other", "database"), ("/etc", "database"), ("a/b", "database")]
)
def test_a_spider_database_outside_the_pack_is_refused(
    server_process: ServerProcess, api: Api, packs: Path, database: str, field: str
) -> None:
    """`databases/<db_id>/...` read and `<db_id>.sqlite` written: an id with `/` is refused
    before either."""
    name = "esc_spider_" + str(abs(hash(database)) % 10_000)
    path = packs / "spider" / f"{name}.csv"
    path.write_text(f'database,question,sql\n{database},q,"SELECT 1"\n')
    response = api.http.post(
        "/api/v1/datasets", json={"name": name, "kind": "spider", "path": str(path)}
    )
    refused(response, 2, field)
    assert dataset_left(server_process, api, name) == []
    assert not list(packs.parent.glob("**/*.sqlite.tmp"))


def test_a_spider_ddl_cannot_name_a_file_outside_its_database(
    server_process: ServerProcess, api: Api, packs: Path
) -> None:
    """The DDL's table names pick `data/<table>.csv`: a table named `../../../../secret`
    read the key file into the database before."""
    database = packs / "spider" / "databases" / "evil_db"
    (database / "data").mkdir(parents=True, exist_ok=True)
    (database / "schema.sql").write_text(
        "CREATE TABLE `../../../../../../../secret.key` (`line` TEXT);\n"
    )
    path = packs / "spider" / "evil.csv"
    path.write_text('database,question,sql\nevil_db,q,"SELECT 1"\n')
    response = api.http.post(
        "/api/v1/datasets", json={"name": "evil_ddl", "kind": "spider", "path": str(path)}
    )
    refused(response, 2, "database")
    assert dataset_left(server_process, api, "evil_ddl") == []


# -- uploads: a small table of hostile records per format ------------------------------------

FETA = {"feta_id": 1, "table_array": [["a", "b"], ["1", "2"]], "question": "q", "answer": "x"}


def feta(**changes: Any) -> dict[str, Any]:
    record = {**FETA, **changes}
    return {k: v for k, v in record.items() if v is not ...}


HOSTILE_UPLOADS: list[tuple[str, str, str, int, str | None]] = [
    # (case, kind, format, body, line, field)
    ("no table_array", "fetaqa", "jsonl", 2, "table_array"),
    ("table_array a string", "fetaqa", "jsonl", 2, "table_array"),
    ("table_array a dict", "fetaqa", "jsonl", 2, "table_array"),
    ("rows not lists", "fetaqa", "jsonl", 2, "table_array"),
    ("a cell a list", "fetaqa", "jsonl", 2, "table_array"),
    ("empty table_array", "fetaqa", "jsonl", 2, "table_array"),
    ("feta_id with /", "fetaqa", "jsonl", 2, "feta_id"),
    ("feta_id ../", "fetaqa", "jsonl", 2, "feta_id"),
    ("feta_id of 300", "fetaqa", "jsonl", 2, "feta_id"),
    ("feta_id a list", "fetaqa", "jsonl", 2, "feta_id"),
    ("no question", "fetaqa", "jsonl", 2, "question"),
    ("answer a dict", "fetaqa", "jsonl", 2, "answer"),
    ("a line not an object", "fetaqa", "jsonl", 2, None),
    ("NaN", "fetaqa", "jsonl", 2, None),
    ("nested 100000 deep", "generic", "jsonl", 2, None),
    ("generic table absolute", "generic", "jsonl", 2, "table"),
    ("generic table ..", "generic", "jsonl", 2, "table"),
    ("generic question a list", "generic", "jsonl", 2, "question"),
    ("generic id of 200", "generic", "jsonl", 2, "id"),
    ("generic id repeated", "generic", "jsonl", 2, "id"),
    ("feta_id repeated", "fetaqa", "jsonl", 2, "feta_id"),
    ("csv field over the limit", "generic", "csv", 2, None),
    ("tsv table absolute", "generic", "tsv", 2, "table"),
]


def upload_body(case: str) -> bytes:
    good = json.dumps(FETA) + "\n"
    bad: Any = {
        "no table_array": feta(table_array=...),
        "table_array a string": feta(table_array="abc"),
        "table_array a dict": feta(table_array={"a": ["1"]}),
        "rows not lists": feta(table_array=[1, 2]),
        "a cell a list": feta(table_array=[["a"], [["x"]]]),
        "empty table_array": feta(table_array=[]),
        "feta_id with /": feta(feta_id="a/b"),
        "feta_id ../": feta(feta_id="../../../../escaped"),
        "feta_id of 300": feta(feta_id="x" * 300),
        "feta_id a list": feta(feta_id=[1]),
        "no question": feta(question=...),
        "answer a dict": feta(answer={"x": 1}),
        "a line not an object": [1, 2],
        "generic table absolute": {"question": "q", "table": "/etc/passwd"},
        "generic table ..": {"question": "q", "table": "../../../../secret.key"},
        "generic question a list": {"question": ["q"]},
        "generic id of 200": {"id": "i" * 200, "question": "q"},
        "generic id repeated": {"id": 0, "question": "q"},  # the first line is example 0
        "feta_id repeated": feta(),
    }
    if case in bad:
        return (good + json.dumps(bad[case]) + "\n").encode()
    if case == "NaN":
        return (
            good + '{"feta_id": 2, "table_array": [["a"]], "question": "q", "answer": NaN}\n'
        ).encode()
    if case == "nested 100000 deep":
        return b'{"question": "q"}\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n"
    if case == "csv field over the limit":
        return b"question,answer\n" + b"q," + b"x" * 200_000 + b"\n"
    if case == "tsv table absolute":
        return b"question\ttable\nq\t/etc/passwd\n"
    raise AssertionError(case)


@pytest.mark.parametrize(
    ("case", "kind", "fmt", "line", "field"),
    HOSTILE_UPLOADS,
    ids=[case[0] for case in HOSTILE_UPLOADS],
)
def test_a_hostile_upload_is_a_400_naming_its_line_and_leaves_nothing(
    server_process: ServerProcess,
    api: Api,
    case: str,
    kind: str,
    fmt: str,
    line: int,
    field: str | None,
) -> None:
    name = "up_" + "".join(ch if ch.isalnum() else "_" for ch in case.lower())[:20]
    escaped = server_process.data_dir / "sources" / "escaped.csv"
    with health_probe(server_process.base_url):
        response = api.http.post(
            f"/api/v1/datasets/{name}/upload",
            params={"kind": kind, "format": fmt},
            content=upload_body(case),
        )
    error = error_of(response, 400)
    assert error["code"] == "invalid_dataset", error
    assert error["line"] == line, error
    if field is not None:
        assert error["field"] == field, error
    assert "root:" not in error["message"]
    assert dataset_left(server_process, api, name) == []
    assert not escaped.exists()
    assert not list(server_process.data_dir.glob("**/escaped*"))


def test_a_good_upload_is_still_imported(server_process: ServerProcess, api: Api) -> None:
    response = api.http.post(
        "/api/v1/datasets/up_fine/upload",
        params={"kind": "fetaqa", "format": "jsonl"},
        content=(json.dumps(FETA) + "\n").encode(),
    )
    assert response.status_code == 201, response.text
    assert response.json()["splits"] == {"dev": 1}


# -- each reader, unit level ------------------------------------------------------------------


@pytest.fixture
def rule(tmp_path: Path) -> SourcePaths:
    """The server's rule for a data directory in tmp_path (its secret key and database are
    never readable)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "secret.key").write_text("KEY")
    return SourcePaths.for_data_dir(data)


READER_CASES = [
    ("generic", "x.jsonl", '{"question": "q", "table": "%s"}\n', 1, "table"),
    ("wikitq", "x.tsv", "id\tutterance\tcontext\ttargetValue\nnt-1\tq\t%s\t1\n", 2, "context"),
    ("tabfact", "x.jsonl", '{"table_id": "%s", "statement": "s", "label": 1}\n', 1, "table_id"),
]


@pytest.mark.parametrize(("kind", "file", "text", "line", "field"), READER_CASES)
@pytest.mark.parametrize("escape", ["absolute", "dotdot", "symlink", "data_dir"])
def test_each_reader_refuses_every_escape(
    tmp_path: Path,
    rule: SourcePaths,
    kind: str,
    file: str,
    text: str,
    line: int,
    field: str,
    escape: str,
) -> None:
    pack = tmp_path / "data" / "sources" / "pack"
    (pack / "all_csv").mkdir(parents=True)
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    (pack / "all_csv" / "link.csv").symlink_to(outside)
    (pack / "link.csv").symlink_to(outside)
    climb = "../" if kind == "tabfact" else ""
    reference = {
        "absolute": str(outside),
        "dotdot": f"{climb}../../../outside.csv",
        "symlink": "link.csv",
        "data_dir": f"{climb}../../secret.key",
    }[escape]
    path = pack / file
    path.write_text(text % reference)
    tables = tmp_path / "tables"
    with pytest.raises(DatasetFormatError) as caught:
        list(read_dataset(kind, path, tables, None, rule.confined_to(pack)))
    assert (caught.value.line, caught.value.field) == (line, field)
    assert not any(tables.iterdir())


def test_the_default_rule_is_the_datasets_folder(tmp_path: Path) -> None:
    """read_dataset without a rule (tools, tests) is confined to the file's folder too."""
    path = tmp_path / "x.jsonl"
    path.write_text('{"question": "q", "table": "/etc/passwd"}\n')
    with pytest.raises(DatasetFormatError, match="line 1, field 'table'"):
        list(read_dataset("generic", path, tmp_path / "tables"))


def test_a_spider_id_or_ddl_table_cannot_leave_the_pack(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    (pack / "databases" / "db" / "data").mkdir(parents=True)
    (tmp_path / "stolen.csv").write_text("line\nsecret\n")
    (pack / "databases" / "db" / "schema.sql").write_text(
        "CREATE TABLE `../../../../stolen` (line TEXT);"
    )
    (pack / "q.csv").write_text('database,question,sql\ndb,q,"SELECT 1"\n')
    with pytest.raises(DatasetFormatError) as caught:
        list(read_dataset("spider", pack / "q.csv", tmp_path / "tables"))
    assert (caught.value.line, caught.value.field) == (2, "database")
    (pack / "q.csv").write_text('database,question,sql\n../../x,q,"SELECT 1"\n')
    with pytest.raises(DatasetFormatError, match="names a file"):
        list(read_dataset("spider", pack / "q.csv", tmp_path / "tables"))
    assert not list(tmp_path.glob("*.sqlite"))
    assert not list(tmp_path.glob("*.tmp"))


def test_check_relative_refuses_a_nul_and_a_home_path(tmp_path: Path) -> None:
    from dagwright.data.connectors.common import SourcePathError

    rule = SourcePaths(()).confined_to(tmp_path)
    for given in ("a\x00b", "~/x", "~root/.ssh/id_rsa"):
        with pytest.raises(SourcePathError):
            rule.check_relative(given, tmp_path, "t")
    (tmp_path / "ok.csv").write_text("a\n")
    assert rule.check_relative("ok.csv", tmp_path, "t") == (tmp_path / "ok.csv").resolve()
    assert os.path.isabs(rule.check_relative("./sub/../ok.csv", tmp_path, "t"))


def test_a_spider_query_nested_past_the_parser_names_its_line(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(FIXTURES / "spider" / "databases", pack / "databases")
    deep = "SELECT " + "(" * 3000 + "1" + ")" * 3000
    db_id = sorted(p.name for p in (pack / "databases").iterdir())[0]
    (pack / "q.csv").write_text(f'database,question,sql\n{db_id},q,"{deep}"\n')
    with pytest.raises(DatasetFormatError) as caught:
        list(read_dataset("spider", pack / "q.csv", tmp_path / "tables"))
    assert (caught.value.line, caught.value.field) == (2, "sql")


def test_a_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    """(An upload's body is refused at the request boundary already; a file on the server
    answered 500.)"""
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"question": "q"}\n{"question": "caf\xe9"}\n')
    with pytest.raises(DatasetFormatError, match="line 2: not UTF-8") as caught:
        list(read_dataset("generic", path, tmp_path / "tables"))
    assert caught.value.line == 2


def test_the_command_line_import_goes_through_the_same_policy(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "x.jsonl").write_text('{"question": "q", "table": "../../etc/passwd"}\n')
    data = tmp_path / "data"
    command = ["eval", "datasets", "import", "evil", str(pack / "x.jsonl"), "--kind", "generic"]
    done = subprocess.run(
        [sys.executable, "-m", "dagwright", *command],
        env=subprocess_environment(DAGWRIGHT_DATA_DIR=str(data)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error [invalid_dataset]: x.jsonl, line 1, field 'table'" in done.stdout + done.stderr
    assert "root:" not in done.stdout + done.stderr
    assert not (data / "sources" / "eval-datasets" / "evil").exists()
