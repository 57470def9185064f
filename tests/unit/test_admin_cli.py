"""The admin channel from the command line, on the embedded log (issue 25): submit, submit --admin,
priorityclass apply, run --accept-admin-on-inputs, replay verify and audit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from events.log.file import FileLog
from tests.cli import evsched

CONFIG = """partitions:
  - name: default
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: team
"""
NODE = {"id": "n1", "source": "rm", "type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 8}}}
APP = {"id": "a1", "source": "rm", "type": "app.added", "data": {"app_id": "a1", "queue": "root.team", "user": "u"}}
ASK = {"id": "k1", "source": "rm", "type": "ask.added",
       "data": {"app_id": "a1", "ask_id": "k1", "resources": {"vcore": 1}}}


def write(path: Path, *events: dict[str, Any]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def config_event(eid: str) -> dict[str, Any]:
    return {"id": eid, "source": "rm", "type": "config.updated", "data": {"yaml": CONFIG}}


def outputs(log: Path) -> list[dict[str, Any]]:
    with FileLog(log, readonly=True) as reader:
        return [orjson.loads(r.value) for r in reader.iter_outputs()]


def of_type(outs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o["data"] for o in outs if o["type"] == kind]


def test_submit_of_a_config_is_not_authorized_and_submit_admin_applies_it(tmp_path: Path) -> None:
    log = tmp_path / "log"
    sent = evsched("submit", "--log", str(log), str(write(tmp_path / "rm.jsonl", config_event("c1"), NODE)),
                   text=True)
    assert "1 rules changes (config.updated) go to the resource managers' channel" in sent.stderr
    evsched("run", "--log", str(log), "--once")
    outs = outputs(log)
    assert [(r["input_id"], r["reason"]) for r in of_type(outs, "input.rejected")] == [("c1", "not-authorized")]
    assert not of_type(outs, "config.applied")
    assert of_type(outs, "cycle.started")[0]["admin_channels"] == ["admin"]
    # The operator's submission goes to the admin channel and is applied; the app it allows is placed.
    evsched("submit", "--admin", "--log", str(log), str(write(tmp_path / "op.jsonl", config_event("c2"))))
    evsched("submit", "--log", str(log), str(write(tmp_path / "apps.jsonl", APP, ASK)))
    evsched("run", "--log", str(log), "--once")
    outs = outputs(log)
    assert len(of_type(outs, "config.applied")) == 1
    assert [d["ask_id"] for d in of_type(outs, "allocation.decided")] == ["k1"]
    verify = evsched("replay", "verify", "--log", str(log), check=False, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    audit = evsched("audit", "--log", str(log), text=True)
    assert "clean" in audit.stdout and "NOT FROM THE ADMIN CHANNEL" not in audit.stdout
    # export writes the refused config as a stand-in (simulate, one trusted file, would apply it)
    evsched("replay", "export", "--log", str(log), "-o", str(tmp_path / "run.jsonl"))
    exported = (tmp_path / "run.jsonl").read_text()
    assert "a rules change refused as not-authorized" in exported
    simulated = evsched("simulate", str(tmp_path / "run.jsonl"), text=True)
    decided = [orjson.loads(line)["data"] for line in simulated.stdout.splitlines()
               if orjson.loads(line).get("type") == "allocation.decided"]
    assert decided == of_type(outs, "allocation.decided")


def test_priorityclass_apply_goes_to_the_admin_channel(tmp_path: Path) -> None:
    log = tmp_path / "log"
    evsched("priorityclass", "apply", "high", "--value", "1000", "--log", str(log))
    evsched("priorityclass", "delete", "high", "--log", str(log))
    with FileLog(log, readonly=True) as reader:
        got = [(r.channel, orjson.loads(r.value)) for r in reader.iter_inputs()]
    assert [(ch, e["type"], e["data"]["name"]) for ch, e in got] == [
        ("admin", "priorityclass.upserted", "high"), ("admin", "priorityclass.deleted", "high")]
    assert got[0][1]["data"]["value"] == 1000
    evsched("run", "--log", str(log), "--once")
    assert not of_type(outputs(log), "input.rejected")


def test_accept_admin_on_inputs_keeps_the_old_rule_says_so_and_audit_reports_it(tmp_path: Path) -> None:
    log = tmp_path / "log"
    evsched("submit", "--log", str(log), str(write(tmp_path / "rm.jsonl", config_event("c1"))))
    ran = evsched("run", "--log", str(log), "--once", "--accept-admin-on-inputs", text=True)
    assert "--accept-admin-on-inputs: config.updated and priorityclass events are accepted from every" in ran.stderr
    outs = outputs(log)
    assert len(of_type(outs, "config.applied")) == 1 and not of_type(outs, "input.rejected")
    assert "admin_channels" not in of_type(outs, "cycle.started")[0]
    audit = evsched("audit", "--log", str(log), text=True)  # reported, not a violation
    assert "NOT FROM THE ADMIN CHANNEL: cycle 1: config.updated 'c1' from 'rm' on inputs was applied" in audit.stdout
    assert "1 rules change(s) applied from outside the admin channel" in audit.stdout
    verify = evsched("replay", "verify", "--log", str(log), check=False, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_audit_flags_a_rules_change_applied_from_inputs_in_an_enforcing_cycle(tmp_path: Path) -> None:
    """A log whose enforcing cycle shows a config from the inputs applied (tampered: the
    rejection removed, config.applied put in its place) is a violation."""
    log = tmp_path / "log"
    evsched("submit", "--log", str(log), str(write(tmp_path / "rm.jsonl", config_event("c1"))))
    evsched("run", "--log", str(log), "--once")
    outs = outputs(log)
    forged = [o for o in outs if o["type"] != "input.rejected"]
    applied = {"specversion": "1.0", "id": "1-0", "source": "evsched", "type": "config.applied",
               "time": forged[0]["time"], "data": {"checksum": "x"}}
    forged.insert(1, applied)
    copy = tmp_path / "forged"
    with FileLog(log, readonly=True) as src, FileLog(copy) as dst:
        for rec in src.iter_inputs():
            (dst.append_admin_sync if rec.channel == "admin" else dst.append_inputs_sync)([(rec.key, rec.value)])
        dst.append_outputs_sync([orjson.dumps(o, option=orjson.OPT_SORT_KEYS) for o in forged])
    audit = evsched("audit", "--log", str(copy), check=False, text=True)
    assert audit.returncode == 1
    assert "VIOLATION admin-channel (cycle 1)" in audit.stdout and "only from admin" in audit.stdout
