package ovs

import "testing"

// TestPortSpecColumns: the hook's "already so" is the bridge step's: the
// VLAN columns with trunks as a set, and mtu_request.
func TestPortSpecColumns(t *testing.T) {
	have := PortStatus{Name: "eth4", Tag: 0, VLANMode: "trunk", Trunks: []int{10, 20}, MTURequest: 9000}
	for _, tc := range []struct {
		name string
		want PortSpec
		same bool
	}{
		{"same, trunks in another order", PortSpec{Name: "eth4", VLANMode: "trunk", Trunks: []int{20, 10}, MTURequest: 9000}, true},
		{"another trunk", PortSpec{Name: "eth4", VLANMode: "trunk", Trunks: []int{10, 30}, MTURequest: 9000}, false},
		{"a tag", PortSpec{Name: "eth4", Tag: 100, VLANMode: "trunk", Trunks: []int{10, 20}, MTURequest: 9000}, false},
		{"another mode", PortSpec{Name: "eth4", VLANMode: "native-untagged", Trunks: []int{10, 20}, MTURequest: 9000}, false},
		{"no mtu_request", PortSpec{Name: "eth4", VLANMode: "trunk", Trunks: []int{10, 20}}, false},
	} {
		if got := tc.want.Columns(have); got != tc.same {
			t.Errorf("%s: Columns = %v, want %v", tc.name, got, tc.same)
		}
	}
}
