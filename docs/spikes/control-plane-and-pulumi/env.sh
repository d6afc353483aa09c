export GOCACHE=/work/spike/cache/go-build GOMODCACHE=/work/spike/cache/mod GOFLAGS="-p=1 -buildvcs=false" GOMAXPROCS=1 GOTOOLCHAIN=local
