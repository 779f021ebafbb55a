from tests.conftest import assert_store_verifies


def test_write_then_show_round_trips(cx, store):
    r = cx.write("fact", "The sky is blue")
    assert cx.show(r.uri).data["statement"] == "The sky is blue"
    assert_store_verifies(store)


def test_cli_write_prints_uri(cli):
    r = cli("write", "fact", "hello")
    assert r.code == 0 and r.out.startswith("cortex://m/")
