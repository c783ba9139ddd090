"""The exact encodings' rank tables are packaged beside the module, not in it
(wasm/abi.json "host_imports"): read on the first exact count, only the encoding in
use. A wrong table is refused by the guest, never counted with. The tables are
process-wide, so the cases that replace one run in a fresh interpreter."""

import json
import subprocess
import sys
from pathlib import Path

import ctxcompact
from ctxcompact import Compactor

MSGS = [{"role": "user", "content": "hello world"}]


def test_the_tables_are_packaged_and_read_on_first_use() -> None:
    pkg = Path(ctxcompact.__file__).parent
    assert (pkg / "vocab" / "o200k_base.bin").stat().st_size == 1597683
    assert (pkg / "vocab" / "cl100k_base.bin").stat().st_size == 744101
    with Compactor() as c:
        assert c.count_tokens(MSGS, encoding="o200k_base")["total"] == 9
        assert c.count_tokens(MSGS, encoding="cl100k_base")["total"] == 9


def _refused_in_fresh(setup: str, call: str) -> list:
    """Runs setup (with rt, the runtime module) and then call in a fresh interpreter;
    returns the CompactError the call raised as [code, path, message]."""
    src = ("import json, ctxcompact._runtime as rt\nfrom pathlib import Path\nfrom ctxcompact import Compactor, CompactError\n"
           + setup + "\ntry:\n    " + call + "\n    print(json.dumps('counted'))\n"
           "except CompactError as e:\n    print(json.dumps([e.code, e.path, str(e)]))\n")
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert isinstance(got, list), got
    return got


def test_a_wrong_table_is_refused_naming_the_file_it_is_not() -> None:
    code, path, message = _refused_in_fresh(
        "rt._vocab['o200k_base'] = (Path(rt.__file__).parent / 'vocab' / 'cl100k_base.bin').read_bytes()",
        "Compactor().count_tokens([{'role': 'user', 'content': 'hi'}], encoding='o200k_base')",
    )
    assert (code, path) == ("invalid_request", "/encoding")
    assert "the o200k_base vocabulary is 744101 bytes, want 1597683" in message


def test_a_missing_table_is_invalid_config_not_a_crash() -> None:
    code, path, message = _refused_in_fresh(
        "rt._VOCAB_NAMES = ()",  # as if the file were missing: the host has none
        "Compactor({'tokens': {'encoding': 'cl100k_base'}}).count_tokens([{'role': 'user', 'content': 'hi'}])",
    )
    assert (code, path) == ("invalid_config", "/config/tokens/encoding")
    assert "the host gives no cl100k_base vocabulary" in message
