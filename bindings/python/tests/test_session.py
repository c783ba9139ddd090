"""The session.run transcripts (testdata/session/transcripts.json, docs/SESSION.md)
replayed through the ContextEngine's own effect loop (ContextEngine._session, the
loop every public method runs) with a scripted performer: each effect the core
asks for must be the transcript's, gets its scripted answer (an error through the
engine's own failure paths: the summarizer's fallback codes, the store's "store"),
or the caller cancels; then the result, the state and the status are the
transcript's, or the failure is raised with the core's message, or the
cancellation stops the loop, nothing recorded. An archive goes to the engine's
store, as every archive does: a scripted one (as host/session_transcripts_test.go's
scriptedStore) whose archive checks each part's archive object against the script
and stops at the first scripted failure."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import pytest

from conftest import TESTDATA
from ctxcompact import ContextEngine
from ctxcompact import _engine

PATH = TESTDATA / "session" / "transcripts.json"


def transcripts() -> List[Dict[str, Any]]:
    if not PATH.exists():
        pytest.skip(f"{PATH} is missing")
    return json.loads(PATH.read_text("utf-8"))["transcripts"]


class StoreDown(RuntimeError):
    """The scripted store's failure."""


class Cancelled(BaseException):
    """The caller's cancellation (not an effect's failure: the loop stops)."""


def fields_of(engine: ContextEngine, fields: Dict[str, Any]) -> List[Tuple[bytes, bytes]]:
    """A step's raw fields as the engine sends them (a lossless session's as
    UTF-8: the archive keeps the originals' text), the messages last."""
    def enc(k: str) -> Tuple[bytes, bytes]:
        return k.encode(), engine._encode(fields[k], "invalid_request", "/" + k, k)

    return [enc(k) for k in fields if k != "messages"] + ([enc("messages")] if "messages" in fields else [])


def test_the_transcripts_are_there() -> None:
    names = [t["name"] for t in transcripts()]
    assert len(names) == len(set(names)) and len(names) >= 10


@pytest.mark.parametrize("name", [t["name"] for t in (json.loads(PATH.read_text("utf-8"))["transcripts"]
                                                     if PATH.exists() else [])])
def test_transcript(name: str, compactor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t = next(t for t in transcripts() if t["name"] == name)
    with ContextEngine(state=t["state"], compactor=compactor) as engine:
        # The answers the loop sends, as the core reads them, and the effects the
        # core asks for, whole (an archive part's part and next too).
        answers: List[Any] = []
        seen: List[Any] = []
        run = _engine._session_run

        def spy(c: Any, parts: Any) -> Any:
            got = dict(parts)
            if b"answer" in got:
                answers.append(json.loads(got[b"answer"]))
            reply, resume = run(c, parts)
            if "effect" in reply:
                seen.append(reply["effect"])
            return reply, resume

        monkeypatch.setattr(_engine, "_session_run", spy)
        for n, step in enumerate(t["steps"]):
            where = f"{name} step {n} ({step['event']})"
            effects = step["effects"]
            asked: List[Dict[str, Any]] = []
            answers.clear()
            seen.clear()

            def answer(effect: Dict[str, Any], archive: bool) -> Any:
                """The script's answer to the next effect (an archive part's
                archive object when archive), which must be effect."""
                k = len(asked)
                asked.append(effect)
                assert k < len(effects), f"{where}: an effect past the script: {effect}"
                want = effects[k]
                assert effect == (want["effect"]["archive"] if archive else want["effect"]), f"{where}: effect {k}"
                if want.get("cancel"):
                    raise Cancelled()
                answer = want["answer"]
                if "error" not in answer:
                    return answer["ok"]
                err = answer["error"]
                if not archive and effect["type"] == "summarize":
                    # The engine's summarizer-failure path: compact.finish's error object.
                    return _engine._summary_answer((None, {"code": err["code"], "message": err["message"]}))
                assert err["code"] == "store", where
                if archive:
                    raise StoreDown(err["message"])

                def fail() -> Any:
                    raise StoreDown(err["message"])

                return _engine._store_call(fail)

            def perform(effect: Dict[str, Any]) -> Any:
                return answer(effect, False)

            def archive(session: str, parts: Any) -> None:
                for part in parts:
                    answer(part, True)

            monkeypatch.setattr(engine.store, "archive", archive)
            before = engine.state
            end = step["end"]
            if "failed" in end:
                with pytest.raises(StoreDown) as ei:
                    engine._session(step["event"], fields_of(engine, step["fields"]), perform)
                assert str(ei.value) == end["failed"]["message"], where
                assert isinstance(ei.value.__cause__, StoreDown), where
                assert engine.state == before, where
            elif end.get("cancelled"):
                with pytest.raises(Cancelled):
                    engine._session(step["event"], fields_of(engine, step["fields"]), perform)
                assert engine.state == before, where
            else:
                result = engine._session(step["event"], fields_of(engine, step["fields"]), perform)
                assert result == end.get("result"), where
                assert engine.state == end["state"], where
                assert engine.get_status() == end["status"], where
            assert len(asked) == len(effects), f"{where}: effects left unasked"
            # Every effect but a cancelled one was answered exactly as scripted.
            assert answers == [e["answer"] for e in effects if not e.get("cancel")], where
            assert seen == [e["effect"] for e in effects], where
