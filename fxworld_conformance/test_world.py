"""Run the kit from pytest without writing a test file::

pytest --pyargs fxworld_conformance.test_world --fxworld-world=sqlite:///tmp/w.db
pytest --pyargs fxworld_conformance.test_world --fxworld-world=mypkg.worlds:make_world
"""

from fxworld_conformance.suite import WorldSuite


class TestWorld(WorldSuite):
    """The whole kit against the world named by ``--fxworld-world``."""
