# The operator and cache node images, as users build them with Docker:
#
#   docker build --target operator  --build-arg VERSION=TAG -t REGISTRY/distcache/operator:TAG .
#   docker build --target cachenode --build-arg VERSION=TAG -t REGISTRY/distcache/cachenode:TAG .
#
# then `make deploy IMG=REGISTRY/distcache/operator:TAG
# CACHENODE_IMG=REGISTRY/distcache/cachenode:TAG` (docs/operator.md).
#
# Releases and the local cluster build these images with ko instead, without
# Docker (.ko.yaml, hack/ko-images.sh, hack/cluster-images.sh): the same
# static binaries with the same flags and version, user 65532 (distroless
# "nonroot"); ko's entrypoint is /ko-app/NAME where this one's is /NAME, so
# the manifests give args only. Keep the two in step.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
# The version both binaries report (hack/version-ldflags.sh).
ARG VERSION=devel
RUN ldflags="-s -w $(VERSION=$VERSION hack/version-ldflags.sh)" && \
    go build -trimpath -ldflags "$ldflags" -o /out/manager . && \
    go build -trimpath -ldflags "$ldflags" -o /out/cachenode ./cachenode

# The cache node: `cachenode serve ...` (the operator passes the arguments)
# and `cachenode gateway ...` next to compute.
FROM gcr.io/distroless/static:nonroot AS cachenode
COPY --from=build /out/cachenode /cachenode
USER 65532:65532
ENTRYPOINT ["/cachenode"]

# The operator (the last stage, so a plain `docker build .` builds it).
FROM gcr.io/distroless/static:nonroot AS operator
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
