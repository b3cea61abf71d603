// Package v20170312 has the names of the Tencent Cloud VPC API that flannel's tencent-vpc backend calls, and no
// implementation: the test bed's flanneld cannot use that backend.
package v20170312

import "errors"

var errAbsent = errors.New("this flanneld was built without the Tencent Cloud VPC SDK: use another backend")

type Filter struct {
	Name   *string
	Values []*string
}

type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteId              *uint64
	RouteType            *string
	Enabled              *bool
}

type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

type DescribeRouteTablesRequest struct{ Filters []*Filter }

type DescribeRouteTablesResponse struct {
	Response *struct{ RouteTableSet []*RouteTable }
}

type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

type Client struct{}

func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) { return nil, errAbsent }

func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest { return &DescribeRouteTablesRequest{} }

func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }

func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }

func (*Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, errAbsent
}

func (*Client) DeleteRoutes(*DeleteRoutesRequest) (struct{}, error) { return struct{}{}, errAbsent }

func (*Client) CreateRoutes(*CreateRoutesRequest) (struct{}, error) { return struct{}{}, errAbsent }
