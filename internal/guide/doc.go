// Package guide holds the test that follows docs/first-application.md as a
// new user would: its commands, in order, in one shell, with a fresh home
// directory, checking the output the page shows.
package guide
