// The sandbox (pause) program of the test bed's images: written by Railforge, no dependencies.
module railforge.invalid/tools/pause

go 1.26.0
