// Package aptinstall holds the tests of apt-install.sh, the one script that installs
// Debian packages for the test suite (build.sh and bindings/js/test.sh call it): it
// waits for another apt-get's locks and names what it needs when it cannot install.
// It has no code of its own.
package aptinstall
