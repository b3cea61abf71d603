"""Helpers several test-bed test modules share (a test module never imports another)."""

import subprocess


def refused_words(result: subprocess.CompletedProcess) -> str:
    """The output of a run that bad input stopped before any change (exit 2, changed=0), its whitespace joined as the
    callback wraps long messages."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "changed=0" in output
    return " ".join(output.split())
