// The Go module proxy does not serve the Tencent Cloud VPC SDK that flannel's tencent-vpc backend imports (403), and
// flannel's main package links every backend. This module stands in for it with the few names that backend uses;
// every call fails, so the test bed's flanneld has no tencent-vpc backend (the lab uses vxlan or host-gw).
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.26.0
