// Fetches the Multus CNI release module for the files the test bed installs (the NetworkAttachmentDefinition CRD).
// Pinned in roles/versions/defaults/main.yml (versions_multus); `railforge testbed build` refuses a mismatch.
module railforge.invalid/tools/multus

go 1.26.0

require gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.2.4
