// Package ovnsb reads what vflag checks of an OVN chassis from the OVN
// Southbound database: the chassis with their encapsulations, and the port
// bindings of the logical switch ports the config names.
//
// It speaks OVSDB through libovsdb with a hand-written model of only the
// tables and columns it reads (Chassis: name, hostname, encaps; Encap:
// type, ip, chassis_name; Port_Binding: logical_port, chassis, up).
// libovsdb refuses, at connect, a model column the server's schema lacks,
// so a model generated from a newer OVN would not connect to an older
// Southbound; every column here is in OVN 23.03's Southbound schema
// (20.27.0, Debian bookworm) and in the newer ones.
//
// It only reads: one monitor of the three tables (Port_Binding restricted
// to the logical ports asked for), its initial snapshot copied out, the
// connection closed. The shell equivalent is
//
//	ovn-sbctl --db=REMOTE list Chassis
//	ovn-sbctl --db=REMOTE list Encap
//	ovn-sbctl --db=REMOTE find Port_Binding logical_port=LSP
//
// A remote is one or several OVSDB connection methods, comma-separated as
// in the Open_vSwitch row's external_ids:ovn-remote: unix:PATH,
// tcp:HOST:PORT, ssl:HOST:PORT. ssl: needs a private key, a certificate
// and a CA certificate (TLS): the server's certificate is verified against
// the CA, not against the host name, as Open vSwitch's own SSL streams do
// (ovs-pki certificates carry no host name).
package ovnsb
