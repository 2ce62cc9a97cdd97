"""The memory check before a load (integrations/triton/memory.py `load_refusal`): pure."""

from integrations.triton.memory import NodeMemory, load_refusal

GIB = 2**30


def test_a_load_that_fits_with_the_reserve_left_is_not_refused():
    memory = NodeMemory(host_bytes=6 * GIB, host_total_bytes=8 * GIB)  # 2 GiB free
    assert load_refusal(memory, need_bytes=GIB, reserve_bytes=GIB) is None


def test_a_load_that_would_eat_into_the_reserve_is_refused_with_the_figures():
    memory = NodeMemory(host_bytes=7 * GIB, host_total_bytes=8 * GIB)  # 1 GiB free
    why = load_refusal(memory, need_bytes=GIB // 2, reserve_bytes=GIB)
    assert why == (
        "not enough memory: 1.0 GiB free, the load needs at least 512 MiB (its files) and "
        "1.0 GiB stays free (SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES)"
    )


def test_a_node_that_reports_no_memory_is_not_judged():
    assert load_refusal(NodeMemory(), need_bytes=GIB, reserve_bytes=GIB) is None
    assert load_refusal(NodeMemory(host_bytes=GIB), need_bytes=GIB, reserve_bytes=GIB) is None
    used_more_than_total = NodeMemory(host_bytes=9 * GIB, host_total_bytes=8 * GIB)
    assert used_more_than_total.host_free_bytes == 0
