"""Shared by every pytest run in the repository: the `extended` marker.

A test or parametrization marked `@pytest.mark.extended` repeats what a
kept one covers (another model family, dtype or chunk of the same check);
it runs only with FLEX_TESTS_FULL=1 and is deselected otherwise, so that CI
fits a Zen 1's time (projects/e2e/selection.py says what else is sampled).
"""

from projects.e2e.selection import FULL_ENV, full


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"extended: runs only with {FULL_ENV}=1 (another family, dtype or chunk "
        "of a check that a kept test makes)")


def pytest_collection_modifyitems(config, items):
    if full():
        return
    dropped = [item for item in items if item.get_closest_marker("extended")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not item.get_closest_marker("extended")]
