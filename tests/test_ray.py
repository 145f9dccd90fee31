"""The Ray Data example of docs/dask_ray.md, run as printed when Ray is installed.

Ray is not a test dependency (it is large); install it with `pip install 'fastpe[ray]'`
to run this file.  The example asserts bitwise equality with fastpe.add_to itself.
"""

import re
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

DOC = Path(__file__).resolve().parents[1] / "docs" / "dask_ray.md"


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance: 2 CPUs, loopback, no dashboard; always shut down."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_data_example(local_ray):
    m = re.search(r"```python\n# ray-example\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"no ```python block starting with '# ray-example' in {DOC}"
    exec(compile(m.group(1), str(DOC), "exec"), {})
