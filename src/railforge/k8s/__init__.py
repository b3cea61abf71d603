"""The gang scheduler on Kubernetes: ``Adapter`` (informers -> core -> bindings), its settings and state."""

from pathlib import Path

CRD_DIR = Path(__file__).parent / "crds"
