import os

import numpy as np
import pytest

import pdc


def test_tag_query(conn, cont):
    """conn.query takes `pdc query`'s language: exact, patterns, ranges."""
    tag = "qstep%d" % os.getpid()  # this run's own key: the cluster is shared
    made = {}
    for i in range(8):
        o = cont.create_object("tq-%d-%d" % (os.getpid(), i), (4,), np.int32)
        o.tags[tag] = i * 5  # 0, 5, ..., 35
        o.tags["kind%d" % os.getpid()] = "even" if i % 2 == 0 else "odd"
        made[o.name] = o.info()["meta_id"]
    got = conn.query("%s=10..20" % tag)
    assert sorted(m.name for m in got) == ["tq-%d-%d" % (os.getpid(), i) for i in (2, 3, 4)]
    assert all(made[m.name] == m.id for m in got)
    assert [m.id for m in got] == sorted(m.id for m in got)
    assert len(conn.query("%s=25.." % tag)) == 3
    assert len(conn.query("%s=35" % tag)) == 1
    assert {m.name for m in conn.query("kind%d=ev*" % os.getpid())} == {
        "tq-%d-%d" % (os.getpid(), i) for i in (0, 2, 4, 6)}
    assert len(conn.query(tag)) == 8
    assert conn.query("%s=1000..2000" % tag) == []
    with pytest.raises(pdc.Invalid, match="pdc_query_tags"):
        conn.query("%s=5..x" % tag)
    with pytest.raises(pdc.Invalid):
        conn.query("")


def test_value_query(cont):
    """obj.query(cond) runs on the data servers: hits, coordinates, values."""
    a = np.linspace(0, 3, 300, dtype=np.float64).reshape(30, 10)
    x = cont.create_object("vq-x", a.shape, np.float64)
    x[:, :] = a
    q = x.query((x > 0.5) & (x < 2))
    want = (a > 0.5) & (a < 2)
    assert q.nhits() == int(want.sum())
    coords = q.selection()
    np.testing.assert_array_equal(coords, np.argwhere(want).astype(np.uint64))
    np.testing.assert_array_equal(q.values(), a[want])
    # or, and a region: rows 5 to 10 only
    q2 = x.query((x < 0.1) | (x >= 2.9), within=np.s_[0:10, :])
    w2 = np.zeros_like(want)
    w2[0:10] = ((a < 0.1) | (a >= 2.9))[0:10]
    assert q2.nhits() == int(w2.sum()) > 0
    np.testing.assert_array_equal(q2.selection(), np.argwhere(w2).astype(np.uint64))
    # values of another object where this one matched (PDC's get_data)
    y = cont.create_object("vq-y", a.shape, np.int64)
    y[:, :] = np.arange(a.size, dtype=np.int64).reshape(a.shape)
    np.testing.assert_array_equal(q.values(of=y), np.flatnonzero(want))
    assert x.query(x > 100).nhits() == 0
    assert len(x.query(x > 100).values()) == 0


def test_value_query_integers_and_refusals(cont):
    """Fractions against integer objects keep their meaning; bad queries are clear."""
    v = cont.create_object("vq-int", (100,), np.int32)
    v[:] = np.arange(100, dtype=np.int32)
    assert v.query(v > 10.5).nhits() == 89
    assert v.query(v >= 10.5).nhits() == 89
    assert v.query(v < 10.5).nhits() == 11
    assert v.query(v <= 10.5).nhits() == 11
    assert v.query(v == 7).values().tolist() == [7]
    with pytest.raises(pdc.Invalid, match="never"):
        v.query(v == 7.5)
    with pytest.raises(pdc.Invalid, match="outside the range"):
        v.query(v > 2**40)
    with pytest.raises(pdc.Invalid, match="no !="):
        v != 3
    with pytest.raises(TypeError, match="&"):
        (v > 1) and (v < 3)
    other = cont.create_object("vq-other", (100,), np.int32)
    with pytest.raises(pdc.Invalid, match="one object"):
        (v > 1) & (other < 3)
    with pytest.raises(pdc.Invalid, match="one object"):
        other.query(v > 1)
    with pytest.raises(pdc.Invalid, match="number"):
        v > "x"
    with pytest.raises(pdc.OutOfRange):
        v.query(v > 1, within=np.s_[50:200])
    assert v == v and v != other and len({v, other}) == 2
    other.close()
    with pytest.raises(pdc.Closed):
        other.query(other > 1)
    assert v.query(v > 97).values().tolist() == [98, 99]  # still serving
