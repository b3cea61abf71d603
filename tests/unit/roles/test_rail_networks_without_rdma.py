"""A cluster without RDMA nodes: the rail_networks role says so in one line and ends, looking nothing up (no
kubeconfig, no API server is needed), so the network stage passes on a valid inventory without rails."""


def test_no_rdma_node_skips_the_rails_in_one_line(run_role):
    result = run_role("rail_networks", {"rail_networks_nodes": []})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert output.count("rail_networks_nodes is empty (no RDMA node)") == 1
    assert "Look up the NetworkAttachmentDefinition CRD" not in output
    assert "failed=0" in output
