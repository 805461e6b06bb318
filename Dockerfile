# Builds both binaries as static executables on a distroless base. Where no
# container engine exists (our CI), hack/ builds the same binaries into image
# tarballs with go-containerregistry instead.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager . && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/cachenode ./cachenode

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /out/cachenode /
USER 65532:65532
ENTRYPOINT ["/manager"]
