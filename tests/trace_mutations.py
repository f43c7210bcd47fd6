"""Changes to a recorded trace's JSON for the property tests: every place in it, and values to put there."""
import json
import math

from hypothesis import strategies as st

# text with lone surrogates too: JSON may escape them ("\\ud800") though they are not Unicode text
odd_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=6) | st.sampled_from(["\ud800", "a\udfffb"])
scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12) | odd_text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
# near a field's own value: the same type at an edge, a neighbour of a count, an empty container
edges = st.sampled_from([0, -1, 1, 2**31, 2**63, -0.0, 1e-300, 1e300, math.nan, math.inf, "", "0", [], {}, None,
                         True, "<script>", "\x1b[31m", "é" * 200])


def paths(value, path=()):
    """Every place in a JSON value: (key, key, index, ...) tuples."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value[:4]):  # the first few items of a list stand for the rest
            yield from paths(item, path + (i,))


def changed(document, path, new, delete: bool):
    if not path:
        return new
    copy = json.loads(json.dumps(document))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return copy


def mutation(data, good: dict) -> bytes:
    """`good` changed at one place drawn from `data` (hypothesis's st.data()): a value replaced, or deleted."""
    path = data.draw(st.sampled_from(list(paths(good))), label="path")
    delete = bool(path) and data.draw(st.integers(0, 4), label="delete") == 0
    new = None if delete else data.draw(edges | json_values, label="new value")
    return json.dumps(changed(good, path, new, delete), allow_nan=True).encode()
