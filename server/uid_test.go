package server

import "os"

func osGetuid() int { return os.Getuid() }
