// Package pathsafe turns names that come from outside vflag (a domain name
// from libvirt's hook arguments, a network name, a name from the config)
// into one path component that cannot leave its directory, and checks that
// a state directory cannot be redirected by someone who is not root.
//
// Every place that keeps state per name (STATE_DIR/hook/<domain>,
// STATE_DIR/deferred/<domain>, ...) builds the path with Join, never with
// filepath.Join on the raw name: the qemu hook runs as root for whoever may
// create a domain, and `STATE_DIR/hook/..` is STATE_DIR itself.
//
// Ordering: CheckDir runs before a directory is opened, created or locked
// (a symlink planted in a directory others may write would otherwise be
// followed by root); Component runs before the name reaches any path.
package pathsafe
