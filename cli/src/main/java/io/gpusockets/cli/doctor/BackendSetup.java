package io.gpusockets.cli.doctor;

import java.nio.file.Path;
import java.util.List;

/**
 * What {@code gpusockets backend} would be started with, as doctor checks it (the backend command's own
 * options, parsed by that command: DoctorCommand hands them over).
 *
 * @param device      auto, native or emulated
 * @param libcuda     --libcuda, or null for the loader's libcuda.so.1
 * @param serviceUser the user the backend runs as (secret files must be theirs)
 */
public record BackendSetup(List<String> listen, String device, String libcuda, Path pskFile, Path tenantsFile,
                           Path tlsKeyStore, Path tlsKeyStorePasswordFile, Path tlsClientCa, Path tlsClientCaPasswordFile,
                           Path adminSocket, String metrics, String isolation, String serviceUser) {
    public BackendSetup {
        listen = List.copyOf(listen);
    }
}
